"""The loopback's rules for clips, as the vendors document them: OpenAI's chat API takes no
`video_url` for its own models (an openai-compatible server's model does), Anthropic takes no
block type it does not know nor more than 100 images, and Gemini takes inline video of a
documented type up to its inline limit."""

from __future__ import annotations

import pytest

from support.doubles import loopback_validation as lv
from support.doubles.loopback import LoopbackServer

KEY = "sk-loop-video-0123456789"
VIDEO_URL = {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAAA"}}
QUESTION = {"type": "text", "text": "what happens?"}


def chat(*parts: dict) -> dict:
    return {"messages": [{"role": "user", "content": list(parts)}], "max_tokens": 8}


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "gpt-5.4", "o3"])
def test_openai_refuses_a_video_url_for_its_own_models(model):
    body = chat(QUESTION, VIDEO_URL)
    if model.startswith(("gpt-5", "o")):
        body = {**body, "max_completion_tokens": 8}
        del body["max_tokens"]
    refusal = lv.check_openai(model, body)
    assert refusal is not None and refusal.status == 400
    error = refusal.body["error"]
    assert error["code"] == "invalid_value" and error["type"] == "invalid_request_error"
    assert error["param"] == "messages[0].content[1].type"
    assert error["message"].startswith("Invalid value: 'video_url'. Supported values are: 'text'")


def test_a_servers_own_model_may_take_a_video_url():
    assert lv.check_openai("loop-model", chat(VIDEO_URL, QUESTION)) is None
    assert lv.check_openai("gpt-4o", chat(QUESTION, {"type": "image_url", "image_url": {}})) is None


def test_the_openai_sdk_sees_the_400_through_the_loopback():
    openai = pytest.importorskip("openai")
    with LoopbackServer(lambda _r: "A", api_key=KEY) as server:
        client = openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="gpt-4o", **chat(VIDEO_URL, QUESTION))
        assert server.stats.refused == 1
        answer = client.chat.completions.create(model="loop-model", **chat(VIDEO_URL, QUESTION))
    assert caught.value.code == "invalid_value"
    assert answer.choices[0].message.content == "A"


def image() -> dict:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
    }


def messages(*blocks: dict) -> dict:
    return {"messages": [{"role": "user", "content": list(blocks)}], "max_tokens": 8}


def test_anthropic_refuses_a_block_type_it_does_not_know():
    video = {"type": "video", "source": {"type": "base64", "media_type": "video/mp4", "data": ""}}
    refusal = lv.check_anthropic("claude-sonnet-4-6", messages(QUESTION, video))
    assert refusal is not None and refusal.status == 400
    assert refusal.body["error"]["type"] == "invalid_request_error"
    assert refusal.message.startswith(
        "messages.0.content.1: Input tag 'video' found using 'type' does not match any of the "
        "expected tags: 'text', 'image'"
    )


def test_anthropic_takes_100_images_a_request_and_refuses_101():
    assert lv.check_anthropic("claude-haiku-4-5", messages(*[image()] * 100, QUESTION)) is None
    refusal = lv.check_anthropic("claude-haiku-4-5", messages(*[image()] * 101, QUESTION))
    assert refusal is not None
    assert refusal.message == "Too much media: 0 document pages + 101 images > 100"


def contents(*parts: dict) -> dict:
    return {"contents": [{"role": "user", "parts": list(parts)}]}


def inline(mime: str, data: str = "AAAA", key: str = "mimeType") -> dict:
    return {"inlineData": {key: mime, "data": data}, "videoMetadata": {"fps": 1.0}}


@pytest.mark.parametrize("key", ["mimeType", "mime_type"])  # google-genai writes snake case
def test_gemini_takes_an_inline_video_of_a_documented_type(key):
    body = contents(inline("video/mp4", key=key), {"text": "q"})
    assert lv.check_gemini("gemini-2.5-flash", body) is None
    refusal = lv.check_gemini("gemini-2.5-flash", contents(inline("video/x-matroska", key=key)))
    assert refusal is not None and refusal.message == "Unsupported MIME type: video/x-matroska"


def test_gemini_refuses_inline_data_over_its_limit_with_its_400():
    limit = lv.GEMINI_INLINE_BYTES
    assert lv.check_gemini("gemini-3.6-flash", contents(inline("video/mp4", "A" * limit))) is None
    refusal = lv.check_gemini("gemini-3.6-flash", contents(inline("video/mp4", "A" * (limit + 1))))
    assert refusal is not None and refusal.status == 400
    assert refusal.body["error"] == {
        "code": 400,
        "message": f"Request payload size exceeds the limit: {limit} bytes.",
        "status": "INVALID_ARGUMENT",
    }
