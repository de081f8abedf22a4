"""The YouTube mimic: the three requests ``youtube-transcript-api`` 1.2 makes.

``/watch`` (the page whose ``ytcfg`` holds the innertube API key), ``/youtubei/v1/player``
(playability and caption tracks) and ``/api/timedtext`` (captions as classic or srv3 XML),
with the answers YouTube gives for private, age-restricted and missing videos.
"""

from __future__ import annotations

import hashlib
import html
import json
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode
from xml.sax.saxutils import escape, quoteattr

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

_GOOGLE_BAD_KEY = {
    "error": {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "errors": [
            {
                "message": "API key not valid. Please pass a valid API key.",
                "domain": "global",
                "reason": "badRequest",
            }
        ],
        "status": "INVALID_ARGUMENT",
    }
}
_GOOGLE_BAD_REQUEST = {
    "error": {
        "code": 400,
        "message": "Request contains an invalid argument.",
        "errors": [
            {
                "message": "Request contains an invalid argument.",
                "domain": "global",
                "reason": "badRequest",
            }
        ],
        "status": "INVALID_ARGUMENT",
    }
}
_YT_STATUS = {
    "private": {
        "status": "LOGIN_REQUIRED",
        "reason": "This video is private",
        "errorScreen": {
            "playerErrorMessageRenderer": {
                "reason": {"simpleText": "This video is private"},
                "subreason": {"runs": [{"text": "The owner has not shared this video with you."}]},
            }
        },
    },
    "age_restricted": {
        "status": "LOGIN_REQUIRED",
        "reason": "This video may be inappropriate for some users.",
    },
    "unavailable": {"status": "ERROR", "reason": "This video is unavailable"},
}


def _format_seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") or "0"


def _caption_track(video: Mapping[str, Any], track: Mapping[str, Any]) -> dict[str, Any]:
    expire = int(time.time()) + 6 * 3600
    query: dict[str, str] = {
        "v": video["video_id"],
        "ei": "sandbox",
        "opi": "112496729",
        "xoaf": "5",
        "hl": "en",
        "ip": "0.0.0.0",
        "ipbits": "0",
        "expire": str(expire),
        "sparams": "ip,ipbits,expire,v,ei,opi,xoaf",
    }
    if track.get("kind") == "asr":
        query["caps"] = "asr"
    signature = hashlib.sha1(f"{video['video_id']}{expire}".encode()).hexdigest().upper()
    query.update({"signature": signature, "key": "yt8"})
    if track.get("kind"):
        query["kind"] = track["kind"]
    query["lang"] = track["language_code"]
    query["fmt"] = "srv3"
    renderer: dict[str, Any] = {
        # the real host, as YouTube sends it: the client maps it to its endpoint
        "baseUrl": "https://www.youtube.com/api/timedtext?" + urlencode(query, safe=","),
        "name": {"runs": [{"text": track["name"]}]},
        "vssId": ("a." if track.get("kind") == "asr" else ".") + track["language_code"],
        "languageCode": track["language_code"],
        "isTranslatable": False,
        "trackName": "",
    }
    if track.get("kind"):
        renderer["kind"] = track["kind"]
    return renderer


class YouTube:
    """The watch page, player API and timed text over one corpus of videos."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.api_key: str = data["api_key"]
        self.videos = {v["video_id"]: v for v in data["videos"]}

    async def watch(self, request: Request) -> Response:
        video = self.videos.get(request.query_params.get("v", ""))
        title = f"{video['title']} - YouTube" if video else "YouTube"
        config = json.dumps(
            {
                "INNERTUBE_API_KEY": self.api_key,
                "INNERTUBE_API_VERSION": "v1",
                "INNERTUBE_CLIENT_NAME": "WEB",
                "INNERTUBE_CLIENT_VERSION": "2.20250101.00.00",
                "INNERTUBE_CONTEXT_CLIENT_NAME": 1,
                "HL": "en",
                "GL": "US",
            }
        )
        body = (
            '<!DOCTYPE html><html lang="en-US" dir="ltr"><head>'
            f"<title>{html.escape(title)}</title>"
            f'<meta property="og:title" content={quoteattr(video["title"] if video else "YouTube")}>'
            f'<script nonce="sandbox">ytcfg.set({config});</script>'
            '</head><body><div id="player"></div></body></html>'
        )
        return HTMLResponse(body, headers={"Content-Type": "text/html; charset=utf-8"})

    async def player(self, request: Request) -> Response:
        if request.query_params.get("key") != self.api_key:
            return JSONResponse(_GOOGLE_BAD_KEY, status_code=400)
        try:
            payload = json.loads(await request.body())
            video_id = payload["videoId"]
            if not isinstance(video_id, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse(_GOOGLE_BAD_REQUEST, status_code=400)
        video = self.videos.get(video_id)
        response: dict[str, Any] = {
            "responseContext": {"visitorData": "CgtzYW5kYm94", "serviceTrackingParams": []}
        }
        status = "unavailable" if video is None else video.get("status", "ok")
        if status != "ok":
            response["playabilityStatus"] = _YT_STATUS[status]
            return JSONResponse(response)
        assert video is not None
        response["playabilityStatus"] = {"status": "OK", "playableInEmbed": True}
        tracks = video.get("captions") or []
        if tracks:
            response["captions"] = {
                "playerCaptionsTracklistRenderer": {
                    "captionTracks": [_caption_track(video, t) for t in tracks],
                    "audioTracks": [{"captionTrackIndices": list(range(len(tracks)))}],
                    "translationLanguages": [],
                    "defaultAudioTrackIndex": 0,
                }
            }
        response["videoDetails"] = {
            "videoId": video_id,
            "title": video["title"],
            "lengthSeconds": str(video["length_seconds"]),
            "channelId": video["channel_id"],
            "isOwnerViewing": False,
            "shortDescription": "",
            "isCrawlable": True,
            "allowRatings": True,
            "viewCount": "0",
            "author": video["author"],
            "isPrivate": False,
            "isLiveContent": False,
        }
        return JSONResponse(response)

    async def timedtext(self, request: Request) -> Response:
        params = request.query_params
        video = self.videos.get(params.get("v", ""))
        tracks = (video or {}).get("captions") or []
        lang, kind = params.get("lang", ""), params.get("kind", "")
        track = next(
            (t for t in tracks if t["language_code"] == lang and t.get("kind", "") == kind), None
        )
        if track is None:
            return Response("", status_code=404, media_type="text/html; charset=UTF-8")
        if params.get("fmt") == "srv3":
            body = "".join(
                f'<p t="{int(start * 1000)}" d="{int(dur * 1000)}">{escape(text)}</p>'
                for start, dur, text in track["lines"]
            )
            xml = (
                '<?xml version="1.0" encoding="utf-8" ?><timedtext format="3"><body>'
                f"{body}</body></timedtext>"
            )
        else:
            # the classic format HTML-escapes the text once more inside the XML
            body = "".join(
                f'<text start="{_format_seconds(start)}" dur="{_format_seconds(dur)}">'
                f"{escape(html.escape(text))}</text>"
                for start, dur, text in track["lines"]
            )
            xml = f'<?xml version="1.0" encoding="utf-8" ?><transcript>{body}</transcript>'
        return Response(xml, media_type="text/xml; charset=UTF-8")

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/watch", self.watch),
            Route("/youtubei/v1/player", self.player, methods=["POST"]),
            Route("/api/timedtext", self.timedtext),
        ]
