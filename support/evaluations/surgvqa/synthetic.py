"""A synthetic SurgVU sample in the published layouts, for offline tests and `-m quick` runs.

Writes, under the output folder (the root to give support.evaluations.surgvqa.dataset.read_vqa /
read_tools):

    cat1_test_set_public/N_fps1.mp4, N_fps1_coco.json, N_fps1_gc.json      N = 1, 2, 3
    SURGVU25_cat_2_sample_set_public/caseNNN/caseNNN.mp4, caseNNN_question.json, caseNNN.json

Every frame is 640x512 pixels at 1 fps: a pinkish tissue background with 0-3 drawn tools, each
a dark shaft ending in a jaw whose colour names the class (JAW_RGB). A video has three installed
tools, one per arm; each arm keeps to its own third of the frame (so boxes never overlap) and the
whole tool lies at least MARGIN pixels inside the frame. The truth box of a tool is the tight box
of its drawn pixels (COCO [x, y, w, h]: w = last column - first column + 1). Category-1 frames
without a tool are left out of the COCO `images` and the gc boxes, as the official converter does.
The COCO file has the official gc_to_coco.py's ground-truth fields (annotation ids from 0,
`area`, `iscrowd` 0, 14 categories); the gc file names its boxes
`slice_nr_<frame + 1>_<tool_with_underscores>`.

Category-2 clips show their three installed tools in every frame; the questions are yes/no ("Was a
<tool> used during the surgery?", true exactly when the clip shows it) and open ("What tools are
used in this clip?", "What organ is being operated on?"), five references each in the write-up's
style (case002 carries the write-up's own example).

    python -m support.evaluations.surgvqa.synthetic --out DIR
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from support.evaluations.surgvqa.tools import CATEGORY_ID, TOOL_CLASSES
from support.evaluations.surgvqa.video import write_video
from support.storage.files import build_once

VERSION = "v1"  # bump when the rendering or the layout changes: it names the cache folder
WIDTH, HEIGHT = 640, 512  # pixels, as the real category-1 frames
N_FRAMES = 8  # frames per video (1 fps: 8 seconds)
MARGIN = 12  # pixels between any drawn tool and its arm's third of the frame
CAT1_DIR, CAT2_DIR = "cat1_test_set_public", "SURGVU25_cat_2_sample_set_public"
BACKGROUND_RGB = np.array((214, 132, 128), np.float32)  # pinkish tissue
SHAFT_RGB = (46, 46, 52)  # every tool's shaft: dark grey
JAW_RGB: dict[str, tuple[int, int, int]] = {  # one distinct jaw colour per class drawn
    "needle driver": (40, 90, 235),
    "cadiere forceps": (40, 190, 70),
    "monopolar curved scissor": (245, 215, 30),
    "force bipolar": (30, 205, 220),
    "prograsp forceps": (150, 60, 210),
    "vessel sealer": (250, 250, 250),
    "clip applier": (255, 140, 0),
}
# category 1: video name -> its three installed tools (arm 1, 2, 3 = left, middle, right third)
CAT1_VIDEOS: dict[str, tuple[str, str, str]] = {
    "1": ("needle driver", "cadiere forceps", "monopolar curved scissor"),
    "2": ("force bipolar", "prograsp forceps", "needle driver"),
    "3": ("vessel sealer", "cadiere forceps", "clip applier"),
}
VISIBLE_COUNTS = (1, 2, 3, 0, 2, 1, 3, 0)  # tools shown per frame, rotated by one per video
ORGAN = "uterine horn"


def _yes(tool: str) -> list[str]:
    return [
        "Yes",
        f"Yes, a {tool} was used.",
        f"A {tool} was used.",
        f"A {tool} was utilized.",
        f"There is clear evidence a {tool} was used.",
    ]


def _no(tool: str) -> list[str]:  # the write-up's five for "large needle driver"
    return [
        "No",
        f"No, a {tool} was not used.",
        f"A {tool} was not used.",
        f"No {tool} was utilized.",
        f"There is no indication a {tool} was used.",
    ]


def _tools_phrased(tools: tuple[str, ...]) -> list[str]:
    listed = f"{', '.join(tools[:-1])} and {tools[-1]}"
    return [
        listed[0].upper() + listed[1:],
        f"The tools used are {listed}.",
        f"{listed[0].upper() + listed[1:]} are used in this clip.",
        f"This clip uses {listed}.",
        f"The surgeon uses {listed}.",
    ]


def _organ_phrased(organ: str) -> list[str]:
    return [
        organ[0].upper() + organ[1:],
        f"The organ being operated on is the {organ}.",
        f"The {organ} is being operated on.",
        f"The surgery is performed on the {organ}.",
        f"The procedure involves the {organ}.",
    ]


def _yes_no(tool: str, tools: tuple[str, ...]) -> tuple[str, list[str]]:
    question = f"Was a {tool} used during the surgery?"
    # truth follows what the clip shows ("large needle driver" is the needle driver class)
    shown = tool.removeprefix("large ") in tools
    return question, _yes(tool) if shown else _no(tool)


# category 2: case -> (its three installed tools, question, five references)
def _cat2_cases() -> dict[str, tuple[tuple[str, str, str], str, list[str]]]:
    sets = {
        "case001": ("needle driver", "cadiere forceps", "monopolar curved scissor"),
        "case002": ("cadiere forceps", "force bipolar", "monopolar curved scissor"),
        "case003": ("vessel sealer", "cadiere forceps", "prograsp forceps"),
        "case004": ("needle driver", "force bipolar", "cadiere forceps"),
        "case005": ("cadiere forceps", "force bipolar", "prograsp forceps"),
        "case006": ("needle driver", "monopolar curved scissor", "force bipolar"),
    }
    asks = {
        "case001": _yes_no("needle driver", sets["case001"]),
        "case002": _yes_no("large needle driver", sets["case002"]),
        "case003": _yes_no("vessel sealer", sets["case003"]),
        "case004": _yes_no("clip applier", sets["case004"]),
        "case005": ("What tools are used in this clip?", _tools_phrased(sets["case005"])),
        "case006": ("What organ is being operated on?", _organ_phrased(ORGAN)),
    }
    return {case: (sets[case], *asks[case]) for case in sets}


def _background(rng: np.random.Generator) -> Image.Image:
    """A video's tissue, (H, W) RGB: the base pink, smooth shading and a fine grain (never dark,
    never near a jaw colour). The camera holds still, so one background serves every frame."""
    low = rng.normal(1.0, 0.05, (HEIGHT // 32 + 1, WIDTH // 32 + 1)).astype(np.float32)
    shade = np.asarray(Image.fromarray(low).resize((WIDTH, HEIGHT), Image.BILINEAR))
    grain = rng.integers(-4, 5, (HEIGHT, WIDTH, 1)).astype(np.float32)
    rgb = BACKGROUND_RGB * shade[..., None] + grain
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def _tool_shapes(rng: np.random.Generator, arm: int) -> tuple[list, list]:
    """The shaft and jaw polygons (pixel (x, y) points) of one tool in arm `arm`'s third of the
    frame, placed at random but wholly inside it, MARGIN pixels from its sides."""
    angle = rng.uniform(0, 2 * math.pi)  # radians, direction from the shaft's end to the tip
    length, jaw = rng.uniform(80, 130), rng.uniform(22, 30)  # pixels
    ax, ay = math.cos(angle), math.sin(angle)
    nx, ny = -ay, ax  # unit normal
    half = 7.0  # shaft half width, pixels

    def at(u: float, v: float) -> tuple[float, float]:  # axis u, normal v from the shaft's end
        return (u * ax + v * nx, u * ay + v * ny)

    shaft = [at(0, half), at(length, half), at(length, -half), at(0, -half)]
    # two blunt prongs (each end half a shaft wide) around a V notch
    jaws = [at(length, half), at(length + jaw, 1.7 * half), at(length + jaw, 0.7 * half),
            at(length + 0.5 * jaw, 0), at(length + jaw, -0.7 * half),
            at(length + jaw, -1.7 * half), at(length, -half)]  # fmt: skip
    pts = np.array(shaft + jaws)
    x_lo, x_hi = arm * WIDTH / 3 + MARGIN, (arm + 1) * WIDTH / 3 - MARGIN  # the arm's third
    y_lo, y_hi = MARGIN, HEIGHT - MARGIN
    dx = rng.uniform(x_lo - pts[:, 0].min(), x_hi - 1 - pts[:, 0].max())
    dy = rng.uniform(y_lo - pts[:, 1].min(), y_hi - 1 - pts[:, 1].max())
    return [(x + dx, y + dy) for x, y in shaft], [(x + dx, y + dy) for x, y in jaws]


def _render(
    background: Image.Image, rng: np.random.Generator, tools: list[tuple[int, str]]
) -> tuple[np.ndarray, list]:
    """One frame with `tools` = [(arm, class)] drawn: (H, W, 3) uint8 and [(class, (x, y, w, h))]
    truth boxes, the tight boxes of each tool's drawn pixels."""
    image = background.copy()
    draw = ImageDraw.Draw(image)
    boxes = []
    for arm, tool in tools:
        shaft, jaws = _tool_shapes(rng, arm)
        mask = Image.new("L", (WIDTH, HEIGHT), 0)
        mdraw = ImageDraw.Draw(mask)
        for poly, colour in ((shaft, SHAFT_RGB), (jaws, JAW_RGB[tool])):
            draw.polygon(poly, fill=colour)
            mdraw.polygon(poly, fill=255)
        x0, y0, x1, y1 = mask.getbbox()  # of the non-zero pixels; x1, y1 exclusive
        boxes.append((tool, (x0, y0, x1 - x0, y1 - y0)))
    return np.asarray(image), boxes


def _cat1_video(folder: Path, v: int, name: str, seed: int) -> None:
    """Write N_fps1.mp4 and its _coco.json / _gc.json."""
    rng = np.random.default_rng([seed, 1, v])
    installed = CAT1_VIDEOS[name]
    counts = VISIBLE_COUNTS[v:] + VISIBLE_COUNTS[:v]
    background = _background(rng)
    frames, images, annotations, gc_boxes = [], [], [], []
    for f, n in enumerate(counts):
        arms = sorted(int(a) for a in rng.choice(3, size=n, replace=False))
        image, boxes = _render(background, rng, [(a, installed[a]) for a in arms])
        frames.append(image)
        if boxes:  # the official converter lists only frames with boxes
            images.append({"id": f, "width": WIDTH, "height": HEIGHT, "file_name": f"{f:010d}.jpg",
                           "date_captured": "2024-07-01 00:00:00"})  # fmt: skip
        for tool, (x, y, w, h) in boxes:
            annotations.append({"category_id": CATEGORY_ID[tool], "image_id": f,
                                "bbox": [x, y, w, h], "area": w * h,
                                "id": len(annotations), "iscrowd": 0})  # fmt: skip
            corners = [[x, y, 0.5], [x + w, y, 0.5], [x + w, y + h, 0.5], [x, y + h, 0.5]]
            gc_boxes.append({"corners": corners,
                             "name": f"slice_nr_{f + 1}_{tool.replace(' ', '_')}"})  # fmt: skip
    coco = {
        "images": images,
        "annotations": annotations,
        "categories": [{"id": CATEGORY_ID[t], "name": t} for t in TOOL_CLASSES],
    }
    gc = {
        "type": "Multiple 2D bounding boxes",
        "boxes": gc_boxes,
        "version": {"major": 1, "minor": 0},
    }
    write_video(folder / f"{name}_fps1.mp4", frames, fps=1)
    (folder / f"{name}_fps1_coco.json").write_text(json.dumps(coco), encoding="utf-8")
    (folder / f"{name}_fps1_gc.json").write_text(json.dumps(gc, indent=4), encoding="utf-8")


def _cat2_case(folder: Path, k: int, case: str, seed: int) -> None:
    """Write caseNNN/caseNNN.mp4, caseNNN_question.json and caseNNN.json."""
    installed, question, answers = _cat2_cases()[case]
    rng = np.random.default_rng([seed, 2, k])
    background = _background(rng)
    frames = [_render(background, rng, list(enumerate(installed)))[0] for _ in range(N_FRAMES)]
    out = folder / case
    out.mkdir(parents=True, exist_ok=True)
    write_video(out / f"{case}.mp4", frames, fps=1)
    (out / f"{case}_question.json").write_text(json.dumps(question), encoding="utf-8")
    # one reference a line, as the organisers' ground-truth files
    text = "[\n" + ",\n".join(json.dumps(a) for a in answers) + "\n]\n"
    (out / f"{case}.json").write_text(text, encoding="utf-8")


def build_surgvu(out_dir: Path, seed: int = 0) -> Path:
    """Write the synthetic sample under out_dir (deterministic from seed); returns out_dir."""
    out_dir = Path(out_dir)
    cat1, cat2 = out_dir / CAT1_DIR, out_dir / CAT2_DIR
    cat1.mkdir(parents=True, exist_ok=True)
    cat2.mkdir(parents=True, exist_ok=True)
    for v, name in enumerate(CAT1_VIDEOS):
        _cat1_video(cat1, v, name, seed)
    for k, case in enumerate(_cat2_cases()):
        _cat2_case(cat2, k, case, seed)
    return out_dir


def ensure_surgvu(cache_dir: Path) -> Path:
    """The default synthetic sample under cache_dir, built on first use (safe across processes)."""
    target = Path(cache_dir) / "synthetic" / f"surgvu-{VERSION}"
    return build_once(target, build_surgvu)


def main(argv: list[str] | None = None) -> int:
    prog = "python -m support.evaluations.surgvqa.synthetic"
    ap = argparse.ArgumentParser(prog=prog, description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--out", required=True, type=Path, help="folder to write (must not exist)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        ap.error(f"{args.out} exists and is not empty")
    t0 = time.perf_counter()
    build_surgvu(args.out, args.seed)
    n1, n2 = len(CAT1_VIDEOS), len(_cat2_cases())
    print(f"wrote {n1} tool videos and {n2} VQA cases to {args.out} in "
          f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
