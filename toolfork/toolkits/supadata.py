"""YouTube transcripts and metadata through Supadata (https://docs.supadata.ai).

Endpoints: ``GET /v1/youtube/transcript``, ``/v1/youtube/video``, ``/v1/youtube/channel`` and
``/v1/youtube/playlist`` with the key in ``x-api-key``.

Options: ``{"youtube_transcript": {"lang": "en", "timestamps": True, "chunk_size": 500}}`` (the
first two fix the tool's parameters; ``chunk_size`` is Supadata's ``chunkSize``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolfork.tools import Tool, Toolkit, ToolOutput, tool

from ._options import WebOptions, boolean, integer, pattern
from .http import HttpClient, RetryPolicy, ServiceError, clip, is_http_url

__all__ = ["SupadataYouTubeToolkit"]

DEFAULT_BASE_URL = "https://api.supadata.ai/v1"
ENV_VAR = "SUPADATA_API_KEY"

_VIDEO_ID = re.compile(r"[A-Za-z0-9_-]{11}")
_LANG = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})?")


class SupadataYouTubeToolkit(WebOptions, Toolkit):
    """Tools: ``youtube_transcript``, ``youtube_video_metadata``, ``youtube_channel_metadata``,
    ``youtube_playlist_metadata``.

    The key comes from ``api_key`` or ``SUPADATA_API_KEY`` at call time. ``max_transcript_chars``
    bounds a transcript (an hour of speech is ~50k characters) so it cannot flood the context.

    ``options={"youtube_transcript": {...}}``: ``lang`` and ``timestamps`` fix the tool's parameters
    (``Default(value)``: only their defaults), ``chunk_size`` (characters per timed chunk) is sent as ``chunkSize``. The
    metadata tools take no options. A bad option raises ``OptionError`` naming it.
    """

    name = "supadata"
    OPTIONS = {
        "youtube_transcript": {
            "lang": pattern(_LANG.pattern, "a language code such as 'en' or 'pt-BR'"),
            "timestamps": boolean,
            "chunk_size": integer(1, 100_000),
        }
    }
    PARAMETERS = {"youtube_transcript": ("lang", "timestamps")}

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_transcript_chars: int = 50_000,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        super().__init__()
        self._init_options(options)
        if max_transcript_chars < 1:
            raise ValueError(f"max_transcript_chars must be >= 1, got {max_transcript_chars}")
        self.max_transcript_chars = max_transcript_chars
        self.http = HttpClient(
            "Supadata",
            base_url,
            api_key=api_key,
            env_var=ENV_VAR,
            auth_header="x-api-key",
            auth_scheme=None,
            timeout=timeout,
            retry=retry,
            owner="SupadataYouTubeToolkit",
        )

    def guidelines(self) -> str | None:
        return (
            "Use youtube_transcript to know what is said in a YouTube video (pass its URL or 11-character "
            "ID), and the *_metadata tools for titles, descriptions, counts and dates of videos, channels "
            "and playlists. Quote the transcript rather than guessing what was said."
        )

    def provide(self) -> list[Tool]:
        http = self.http
        limit = self.max_transcript_chars
        chunk_size = self.tool_options("youtube_transcript").get("chunk_size")

        def fetch(path: str, params: dict[str, Any]) -> Any:
            data = http.request("GET", path, params=params)
            if not isinstance(data, dict):
                raise ServiceError(
                    f"Supadata {path} returned {type(data).__name__} instead of a JSON object",
                    service="Supadata",
                )
            return data

        @self.option_tool("youtube_transcript")
        def youtube_transcript(
            video: str,
            lang: str | None = None,
            timestamps: bool = False,
        ) -> ToolOutput:
            """Get the transcript of a YouTube video as text.

            Args:
                video: the video's URL or its 11-character ID
                lang: preferred language as an ISO 639-1 code such as "en"; another available language
                    is returned when this one is missing
                timestamps: prefix each line with its [mm:ss] start time
            """
            ref = _video_ref(video)
            if isinstance(ref, ToolOutput):
                return ref
            if lang is not None and not _LANG.fullmatch(lang):
                return ToolOutput.error(f"lang must be a language code such as 'en' or 'pt-BR', got {lang!r}")
            params = {**ref, "lang": lang, "text": not timestamps, "chunkSize": chunk_size}
            try:
                data = fetch("youtube/transcript", params)
            except ServiceError as exc:
                return ToolOutput.error(str(exc))
            content = data.get("content")
            if isinstance(content, list):
                text = "\n".join(_timed_line(chunk) for chunk in content if isinstance(chunk, dict))
            elif isinstance(content, str):
                text = content
            else:
                return ToolOutput.error(f"Supadata returned no transcript content for {video!r}")
            out: dict[str, Any] = {
                "video": video,
                "lang": data.get("lang"),
                "available_langs": data.get("availableLangs", []),
                "transcript": clip(text, limit),
            }
            if lang is not None and data.get("lang") not in (None, lang):
                out["note"] = f"no transcript in {lang!r}; returned {data.get('lang')!r} instead"
            return ToolOutput.from_value(out)

        @tool("youtube_video_metadata")
        def youtube_video_metadata(video: str) -> ToolOutput:
            """Get a YouTube video's title, description, channel, duration, tags, dates and counts.

            Args:
                video: the video's URL or its 11-character ID
            """
            ref = _video_ref(video)
            if isinstance(ref, ToolOutput):
                return ref
            return _call(fetch, "youtube/video", video)

        @tool("youtube_channel_metadata")
        def youtube_channel_metadata(channel: str) -> ToolOutput:
            """Get a YouTube channel's name, handle, description, subscriber, video and view counts.

            Args:
                channel: the channel's URL, @handle or ID
            """
            if not channel.strip():
                return ToolOutput.error("channel must not be empty: pass a channel URL, @handle or ID")
            return _call(fetch, "youtube/channel", channel.strip())

        @tool("youtube_playlist_metadata")
        def youtube_playlist_metadata(playlist: str) -> ToolOutput:
            """Get a YouTube playlist's title, description, video count, channel and last update.

            Args:
                playlist: the playlist's URL or ID
            """
            if not playlist.strip():
                return ToolOutput.error("playlist must not be empty: pass a playlist URL or ID")
            return _call(fetch, "youtube/playlist", playlist.strip())

        return [
            youtube_transcript,
            youtube_video_metadata,
            youtube_channel_metadata,
            youtube_playlist_metadata,
        ]


def _video_ref(video: str) -> dict[str, str] | ToolOutput:
    """Query parameters naming a video: ``url`` for a link, ``videoId`` for a bare ID."""
    video = video.strip()
    if is_http_url(video):
        return {"url": video}
    if _VIDEO_ID.fullmatch(video):
        return {"videoId": video}
    return ToolOutput.error(f"video must be a YouTube URL or an 11-character video ID, got {video!r}")


def _call(fetch: Any, path: str, ident: str) -> ToolOutput:
    try:
        return ToolOutput.from_value(fetch(path, {"id": ident}))
    except ServiceError as exc:
        return ToolOutput.error(str(exc))


def _timed_line(chunk: dict[str, Any]) -> str:
    offset_ms = chunk.get("offset") or 0
    try:
        seconds = int(float(offset_ms) / 1000)
    except (TypeError, ValueError):
        seconds = 0
    return f"[{seconds // 60:02d}:{seconds % 60:02d}] {chunk.get('text', '')}"
