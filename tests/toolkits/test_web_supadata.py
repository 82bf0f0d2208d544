"""SupadataYouTubeToolkit against a local server speaking Supadata's wire format."""

from __future__ import annotations

import pytest

from tests.toolkits.fakeservers import FakeSupadata
from tests.toolkits.helpers import FAST, call
from toolfork.toolkits.supadata import SupadataYouTubeToolkit

VIDEO = FakeSupadata.VIDEO_ID


@pytest.fixture
def server():
    with FakeSupadata() as s:
        yield s


@pytest.fixture
def toolkit(server):
    return SupadataYouTubeToolkit(server.api_key, base_url=server.url + "/v1", retry=FAST)


def test_definitions():
    names = [t.name for t in SupadataYouTubeToolkit().tools()]
    assert names == [
        "youtube_transcript",
        "youtube_video_metadata",
        "youtube_channel_metadata",
        "youtube_playlist_metadata",
    ]
    assert "youtube_transcript" in (SupadataYouTubeToolkit().guidelines() or "")


def test_transcript_from_a_url(server, toolkit):
    url = f"https://www.youtube.com/watch?v={VIDEO}"
    out = call(toolkit, "youtube_transcript", video=url)
    assert not out.is_error, out.as_text()
    req = server.last()
    assert (req.method, req.path) == ("GET", "/v1/youtube/transcript")
    assert req.query == {"url": url, "text": "true"}
    assert req.headers["x-api-key"] == server.api_key
    assert "authorization" not in req.headers
    assert out.data == {
        "video": url,
        "lang": "en",
        "available_langs": ["en", "es"],
        "transcript": "Never gonna give you up never gonna let you down",
    }


def test_transcript_by_id_with_language_and_timestamps(server, toolkit):
    out = call(toolkit, "youtube_transcript", video=VIDEO, lang="es", timestamps=True)
    assert not out.is_error, out.as_text()
    assert server.last().query == {"videoId": VIDEO, "lang": "es", "text": "false"}
    assert out.data["transcript"] == "[00:18] Nunca te voy a abandonar"
    assert "note" not in out.data


def test_transcript_in_a_missing_language_says_so(toolkit):
    out = call(toolkit, "youtube_transcript", video=VIDEO, lang="de")
    assert out.data["lang"] == "en"
    assert out.data["note"] == "no transcript in 'de'; returned 'en' instead"


def test_transcript_is_clipped(server):
    tk = SupadataYouTubeToolkit(server.api_key, base_url=server.url + "/v1", max_transcript_chars=10)
    out = call(tk, "youtube_transcript", video=VIDEO)
    assert out.data["transcript"].startswith("Never gonn\n[... truncated ")


def test_transcript_input_checks(server, toolkit):
    out = call(toolkit, "youtube_transcript", video="not a video")
    assert out.is_error and "YouTube URL or an 11-character video ID" in out.as_text()
    out = call(toolkit, "youtube_transcript", video=VIDEO, lang="english please")
    assert out.is_error and "lang must be a language code" in out.as_text()
    assert server.requests == []


def test_unknown_video_is_an_error_with_supadatas_explanation(toolkit):
    out = call(toolkit, "youtube_transcript", video="AAAAAAAAAAA")
    assert out.is_error
    assert out.as_text() == (
        "Supadata found nothing there (HTTP 404: Transcript unavailable: No transcript for AAAAAAAAAAA.)."
    )


def test_video_metadata(server, toolkit):
    out = call(toolkit, "youtube_video_metadata", video=f"https://youtu.be/{VIDEO}")
    assert not out.is_error, out.as_text()
    assert server.last().path == "/v1/youtube/video"
    assert server.last().query == {"id": f"https://youtu.be/{VIDEO}"}
    assert out.data["id"] == VIDEO
    assert out.data["channel"] == {"id": FakeSupadata.CHANNEL_ID, "name": "Rick Astley"}
    assert out.data["duration"] == 213


def test_channel_metadata(server, toolkit):
    out = call(toolkit, "youtube_channel_metadata", channel=" @RickAstleyYT ")
    assert not out.is_error, out.as_text()
    assert (server.last().path, server.last().query) == ("/v1/youtube/channel", {"id": "@RickAstleyYT"})
    assert out.data["subscriberCount"] == 4000000
    assert call(toolkit, "youtube_channel_metadata", channel="  ").is_error


def test_playlist_metadata(server, toolkit):
    url = f"https://www.youtube.com/playlist?list={FakeSupadata.PLAYLIST_ID}"
    out = call(toolkit, "youtube_playlist_metadata", playlist=url)
    assert not out.is_error, out.as_text()
    assert (server.last().path, server.last().query) == ("/v1/youtube/playlist", {"id": url})
    assert out.data["videoCount"] == 25
    out = call(toolkit, "youtube_playlist_metadata", playlist="PLnothing")
    assert out.is_error and "HTTP 404" in out.as_text()


def test_no_key(server, monkeypatch):
    monkeypatch.delenv("SUPADATA_API_KEY", raising=False)
    out = call(SupadataYouTubeToolkit(base_url=server.url + "/v1"), "youtube_video_metadata", video=VIDEO)
    assert out.is_error and "SUPADATA_API_KEY" in out.as_text()
    assert server.requests == []
