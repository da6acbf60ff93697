"""`--surgvqa-input video`: a question's clip sent as one video part, end to end.

The option's checks at configure (a model that takes no video is refused, naming the way out);
the request the evaluation builds (one clip at --surgvqa-fps, the frames' timestamps, the video
prompt); and a quick run through the real suite in a subprocess with a `python:` model of the
user's own code that declares video and answers from what it was sent, beside the oracle: no
error outcome, and each row records what went (frames, fps, seconds).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from support.contract.evaluation import OptionError
from support.evaluations.surgvqa.spec import VIDEO_FPS, configure
from support.evaluations.surgvqa.synthetic import N_FRAMES, ensure_surgvu
from support.evaluations.surgvqa.task import SurgvqaEvaluation
from support.settings import ModelSettings, RunSettings

# a model of the user's own: it reads text and video, and answers with what its clip held
WATCHER = """
    class Watcher:
        modalities = ("video",)

        def generate(self, request):
            (part,) = [p for p in request.parts if p.video is not None]
            clip = part.video
            times = ",".join(f"{t:g}" for t in clip.timestamps)
            return f"Yes. {len(clip.frames)} frames of {clip.frames[0].shape} at {times}"
"""
BLIND = """
    class Reader:
        def generate(self, request):
            return "No."
"""


def _run(*names: str) -> RunSettings:
    return RunSettings(models=ModelSettings(names=names))


def test_frames_stays_the_default_and_bad_values_name_their_option():
    settings = configure({}, _run("oracle"))
    assert (settings.input, settings.fps) == ("frames", VIDEO_FPS)
    with pytest.raises(OptionError, match=r"--surgvqa-input.*'clip': one of frames, video"):
        configure({"surgvqa_input": "clip"}, _run("oracle"))
    for fps in (0, -1.0, 31.0):
        with pytest.raises(OptionError, match="--surgvqa-fps"):
            configure({"surgvqa_input": "video", "surgvqa_fps": fps}, _run("oracle"))


def test_a_model_that_takes_no_video_is_refused_at_configure(tmp_path, monkeypatch):
    (tmp_path / "blind_reader.py").write_text(textwrap.dedent(BLIND))
    monkeypatch.syspath_prepend(str(tmp_path))
    llava = tmp_path / "llava"
    llava.mkdir()
    (llava / "config.json").write_text(
        json.dumps({"architectures": ["LlavaForConditionalGeneration"]})
    )
    qwen = tmp_path / "qwen"
    qwen.mkdir()
    (qwen / "config.json").write_text(
        json.dumps({"architectures": ["Qwen2_5_VLForConditionalGeneration"]})
    )
    names = ("oracle", "python:blind_reader:Reader", f"hf:{llava}", f"vllm:{qwen}")
    with pytest.raises(OptionError) as refused:
        configure({"surgvqa_input": "video"}, _run(*names))
    said = str(refused.value)
    assert said.startswith("--surgvqa-input: video: python:blind_reader:Reader (reads image, text)")
    assert f"hf:{llava} (reads image, text)" in said
    assert "--surgvqa-input frames" in said
    assert "oracle" not in said and f"vllm:{qwen}" not in said  # these take video
    # under the default, the same models are fine
    assert configure({}, _run(*names)).input == "frames"


def test_a_video_request_is_one_clip_at_the_rate_asked(shared_cache):
    root = ensure_surgvu(shared_cache)
    values = {"surgvqa_root": str(root), "surgvqa_input": "video", "surgvqa_fps": 0.5}
    settings = configure(values, _run("oracle"))
    evaluation = SurgvqaEvaluation.load(_run("oracle"), settings)
    case = next(c for c in evaluation.cases() if c.params["category"] == "vqa")
    request = evaluation.request(case)
    (part,) = request.videos
    assert request.images == [] and part.video.fps == 0.5
    assert part.video.timestamps == tuple(2.0 * k for k in range(N_FRAMES // 2))
    assert part.video.indices == tuple(range(0, N_FRAMES, 2))
    prompt = request.parts[-1].text
    assert "8-second clip" in prompt and "0.5 frames per second" in prompt
    assert evaluation.sent(case) == {"input": "video", "frames": 4, "fps": 0.5, "seconds": 8.0}


@pytest.mark.slow
def test_a_quick_video_run_sends_each_clip_whole(run_suite, tmp_path, monkeypatch):
    (tmp_path / "clip_watcher.py").write_text(textwrap.dedent(WATCHER))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    watcher = "python:clip_watcher:Watcher"
    result, results = run_suite(
        "surgvqa", "-m", "quick", "--surgvqa-input", "video",
        "--model", "oracle", "--model", watcher, "-k", "case",
    )  # fmt: skip
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    (run,) = (results / "surgvqa").iterdir()
    rows = [json.loads(line) for line in (run / "raw_results.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["model"] == watcher]
    assert len(mine) == 3 and all(r["status"] != "error" for r in rows)
    times = ",".join(str(k) for k in range(N_FRAMES))
    for row in mine:
        assert row["raw"] == f"Yes. {N_FRAMES} frames of (512, 640, 3) at {times}"
        assert row["extra"]["sent"] == {"input": "video", "frames": 8, "fps": 1.0, "seconds": 8.0}
    assert Path(run / "summary.csv").is_file()
