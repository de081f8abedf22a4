"""Page listings of the browser tools: a page's title, URL, text and numbered elements.

A listing numbers every visible link, field and button (``[7]``, written into the page as
``data-mastif-ref``) so the interaction tools can target them. It is made by a script
that runs in a JavaScript world of its own (Chromium's DevTools ``Page.createIsolatedWorld``:
the page's DOM, none of its scripts' globals or prototypes), bounds itself there (elements,
text, every string) and says what it cut; :func:`sanitise_snapshot` bounds and checks the
answer again here before :func:`format_snapshot` turns it into text (issue 37: a 251-byte
page of 300,000 links raised the harness's peak memory by 1.1 GB).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from mastif.core.textclip import clip_text, head_at_word
from mastif.tools.base import ToolError

#: how many links / fields / buttons a page listing shows
MAX_LISTED = 40


#: how many candidate elements (links, fields and buttons, hidden ones included) a listing
#: looks at, at most: a page of 300,000 links is not walked to its end
MAX_EXAMINED = 10_000
#: the longest title, URL and link target a listing shows
MAX_TITLE_CHARS = 300
MAX_URL_CHARS = 2048
MAX_HREF_CHARS = 500
#: the longest link text, label, value and option a listing shows
MAX_LABEL_CHARS = 80
#: how many options of one select a listing shows
MAX_OPTIONS = 25
#: page text read beyond what the listing shows (enough to cut it between two words)
TEXT_MARGIN = 1000
#: the isolated JavaScript world the listing runs in (one per frame, by this name)
SNAPSHOT_WORLD = "mastif-snapshot"
#: the page's time to list itself; the listing script is stopped after it
SNAPSHOT_TIMEOUT_MS = 10_000

#: Python's whitespace (``str.isspace``, ``re``'s ``\s``) as a JavaScript character class,
#: so the page drops blank lines exactly as :func:`format_snapshot` does
_PY_SPACE = r"[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"

#: Numbers visible links, fields and buttons with data-mastif-ref and lists them, within
#: ``lim``: at most ``listed`` of each kind, no more than ``examine`` candidates looked at,
#: the text (blank lines dropped) cut at ``text`` characters, every other string at its
#: cap. ``truncated`` says what was cut: ``elements`` (listed / candidates / examined),
#: ``text``, ``title`` and ``url`` (their full lengths); a select's ``more`` counts the
#: options not listed. Run in an isolated world, nothing the page's own scripts redefine
#: (``String.prototype.slice``, ``innerText`` getters, ``document.querySelectorAll`` ...)
#: is seen here.
_SNAPSHOT_JS = r"""
(lim) => {
  const truncated = {};
  // the start of s, at most n UTF-16 units, never half of a surrogate pair
  const cut = (s, n) => {
    s = s == null ? '' : String(s);
    if (s.length <= n) return s;
    const c = s.charCodeAt(n - 1);
    return s.slice(0, c >= 0xD800 && c <= 0xDBFF ? n - 1 : n);
  };
  // the length of s in code points, as Python counts it
  const points = s => {
    let n = s.length;
    for (let i = 0; i + 1 < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0xD800 && c <= 0xDBFF) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xDC00 && d <= 0xDFFF) { n -= 1; i += 1; }
      }
    }
    return n;
  };
  const capped = (s, n, key) => {
    s = s == null ? '' : String(s);
    if (s.length > n) truncated[key] = points(s);
    return cut(s, n);
  };
  const clean = s => cut(cut(s, 4096).replace(/\s+/g, ' ').trim(), lim.label);
  const out = {title: capped(document.title, lim.title, 'title'),
               url: capped(location.href, lim.url, 'url'),
               text: '', links: [], fields: [], buttons: [], truncated};
  // the text without blank lines, stripped (a loop: a regex for trailing space would
  // take quadratic time on a long run of spaces that is not trailing)
  const spaced = (document.body ? String(document.body.innerText || '') : '')
    .replace(new RegExp('\n' + lim.space + '*\n+', 'g'), '\n');
  const space = new RegExp('^' + lim.space + '$');
  let start = 0;
  let end = spaced.length;
  while (start < end && space.test(spaced[start])) start += 1;
  while (end > start && space.test(spaced[end - 1])) end -= 1;
  const text = spaced.slice(start, end);
  out.text = cut(text, lim.text);
  if (text.length > lim.text) truncated.text = points(text);
  const shown = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const labelOf = el => {
    const id = el.id ? String(el.id) : '';
    if (id && id.length <= 256) {
      const l = document.querySelector('label[for="' + CSS.escape(id) + '"]');
      if (l) return clean(l.innerText);
    }
    const wrap = el.closest('label');
    if (wrap) return clean(wrap.innerText);
    return clean(el.getAttribute('aria-label') || el.getAttribute('placeholder') || el.name);
  };
  const BUTTONS = ['submit', 'button', 'reset', 'image'];
  const old = document.querySelectorAll('[data-mastif-ref]');
  for (let i = 0; i < old.length; i++) old[i].removeAttribute('data-mastif-ref');
  const all = document.querySelectorAll('a[href], input, select, textarea, button');
  let n = 0;
  let i = 0;
  let skipped = false;
  const full = () => out.links.length >= lim.listed && out.fields.length >= lim.listed &&
    out.buttons.length >= lim.listed;
  for (; i < all.length; i++) {
    if (i >= lim.examine || (skipped && full())) {
      skipped = true;
      break;
    }
    const el = all[i];
    if (el.type === 'hidden') continue;
    const tag = String(el.tagName).toLowerCase();
    const kind = tag === 'a' ? 'links'
      : tag === 'button' || (tag === 'input' && BUTTONS.includes(el.type)) ? 'buttons'
      : 'fields';
    if (out[kind].length >= lim.listed) {
      // one shown element left out is enough to say the listing is cut
      if (!skipped && shown(el)) skipped = true;
      continue;
    }
    if (!shown(el)) continue;
    n += 1;
    el.setAttribute('data-mastif-ref', String(n));
    if (kind === 'links') {
      out.links.push({ref: n, text: clean(el.innerText) || clean(el.title),
                      href: cut(el.getAttribute('href'), lim.href)});
    } else if (kind === 'buttons') {
      out.buttons.push({ref: n, text: clean(el.innerText || el.value || el.getAttribute('aria-label'))});
    } else {
      const f = {ref: n, kind: cut(tag === 'input' ? el.type : tag, lim.label),
                 label: labelOf(el), value: clean(el.value)};
      if (tag === 'select') {
        const options = el.options;
        f.options = [];
        for (let k = 0; k < options.length && k < lim.options; k++) {
          f.options.push(clean(options[k].text));
        }
        if (options.length > lim.options) f.more = options.length - lim.options;
      }
      if (el.type === 'checkbox' || el.type === 'radio') f.checked = !!el.checked;
      out.fields.push(f);
    }
  }
  if (skipped) truncated.elements = {listed: n, candidates: all.length, examined: i};
  return out;
}
"""


def _limits(text_chars: int) -> dict[str, Any]:
    """The bounds :data:`_SNAPSHOT_JS` lists a page within."""
    return {
        "listed": MAX_LISTED,
        "examine": MAX_EXAMINED,
        "text": text_chars + TEXT_MARGIN,
        "title": MAX_TITLE_CHARS,
        "url": MAX_URL_CHARS,
        "href": MAX_HREF_CHARS,
        "label": MAX_LABEL_CHARS,
        "options": MAX_OPTIONS,
        "space": _PY_SPACE,
    }


class _Malformed(Exception):
    pass


def _string(value: Any, cap: int) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _Malformed(f"a string was a {type(value).__name__}")
    return value[:cap]


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(f"a count was {type(value).__name__} {str(value)[:20]!r}")
    return value


def _listed(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(x, dict) for x in value[:MAX_LISTED]):
        raise _Malformed("an element list was not a list of objects")
    return value[:MAX_LISTED]


def sanitise_snapshot(raw: Any, text_chars: int) -> dict[str, Any]:
    """The page script's answer checked and bounded again on this side: every string cut to
    the cap the script applies, every list to :data:`MAX_LISTED`; anything not shaped like a
    listing is refused (:class:`ToolError`). A list cut here is reported in ``truncated``."""
    try:
        if not isinstance(raw, dict):
            raise _Malformed(f"the answer was a {type(raw).__name__}")
        lists = {k: raw.get(k, []) for k in ("links", "fields", "buttons")}
        received = sum(len(v) for v in lists.values() if isinstance(v, list))
        cut_here = any(isinstance(v, list) and len(v) > MAX_LISTED for v in lists.values())
        snap: dict[str, Any] = {
            "title": _string(raw.get("title"), MAX_TITLE_CHARS),
            "url": _string(raw.get("url"), MAX_URL_CHARS),
            "text": _string(raw.get("text"), text_chars + TEXT_MARGIN),
            "links": [
                {
                    "ref": _count(x.get("ref")),
                    "text": _string(x.get("text"), MAX_LABEL_CHARS),
                    "href": _string(x.get("href"), MAX_HREF_CHARS),
                }
                for x in _listed(lists["links"])
            ],
            "fields": [],
            "buttons": [
                {"ref": _count(x.get("ref")), "text": _string(x.get("text"), MAX_LABEL_CHARS)}
                for x in _listed(lists["buttons"])
            ],
        }
        for x in _listed(lists["fields"]):
            field: dict[str, Any] = {
                "ref": _count(x.get("ref")),
                "kind": _string(x.get("kind"), MAX_LABEL_CHARS),
                "label": _string(x.get("label"), MAX_LABEL_CHARS),
                "value": _string(x.get("value"), MAX_LABEL_CHARS),
            }
            if "options" in x:
                options = x["options"]
                if not isinstance(options, list):
                    raise _Malformed("a select's options were not a list")
                field["options"] = [_string(o, MAX_LABEL_CHARS) for o in options[:MAX_OPTIONS]]
                more = _count(x.get("more", 0)) + max(0, len(options) - MAX_OPTIONS)
                if more:
                    field["more"] = more
            if "checked" in x:
                field["checked"] = bool(x["checked"])
            snap["fields"].append(field)
        truncated = raw.get("truncated", {})
        if not isinstance(truncated, dict):
            raise _Malformed("its truncation report was not an object")
        report: dict[str, Any] = {
            k: _count(truncated[k]) for k in ("text", "title", "url") if k in truncated
        }
        if "elements" in truncated or cut_here:
            elements = truncated.get("elements", {})
            if not isinstance(elements, dict):
                raise _Malformed("its element count was not an object")
            listed = sum(len(snap[k]) for k in ("links", "fields", "buttons"))
            candidates = _count(elements.get("candidates", 0))
            report["elements"] = {"listed": listed, "candidates": max(candidates, received)}
        snap["truncated"] = report
        return snap
    except _Malformed as exc:
        raise ToolError(f"the page listing was malformed: {exc}") from None
    except (AttributeError, TypeError, KeyError) as exc:
        raise ToolError(f"the page listing was malformed ({type(exc).__name__})") from None


def format_snapshot(snap: dict[str, Any], text_chars: int) -> str:
    """A page as compact text: title, URL, visible text, then numbered links/fields/buttons.

    What the page side cut (``snap["truncated"]``, see :func:`sanitise_snapshot`) is said:
    the text's note counts the characters dropped from the whole text, the listing's how
    many of the page's candidate elements it shows."""
    truncated = snap.get("truncated") or {}
    title = snap["title"] or "(untitled)"
    if "title" in truncated:
        title += f" ... [title cut at {len(snap['title'])} of {truncated['title']} characters]"
    url = snap["url"]
    if "url" in truncated:
        url += f" ... [URL cut at {len(snap['url'])} of {truncated['url']} characters]"
    lines = [f"Page: {title}", f"URL: {url}", "", "Text:"]
    text = re.sub(r"\n\s*\n+", "\n", snap["text"] or "").strip()
    if "text" in truncated:
        # the page sent the start of its text: the note counts what the whole text loses
        head = head_at_word(text, text_chars)
        lines.append(f"{head}\n... [truncated {truncated['text'] - len(head)} characters]")
    else:
        lines.append(clip_text(text, text_chars) if text else "(no text)")
    if snap["links"]:
        lines.append("")
        lines.append("Links:")
        lines += [
            f"[{x['ref']}] {x['text'] or x['href']} -> {x['href']}"
            for x in snap["links"][:MAX_LISTED]
        ]
    if snap["fields"]:
        lines.append("")
        lines.append("Form fields:")
        for f in snap["fields"][:MAX_LISTED]:
            desc = f'[{f["ref"]}] {f["kind"]} "{f["label"]}"'
            if f.get("value"):
                desc += f' = "{f["value"]}"'
            if "checked" in f:
                desc += " (checked)" if f["checked"] else " (unchecked)"
            if f.get("options"):
                desc += " options: " + ", ".join(f["options"][:MAX_OPTIONS])
                if f.get("more"):
                    desc += f" (+{f['more']} more)"
            lines.append(desc)
    if snap["buttons"]:
        lines.append("")
        lines.append(
            "Buttons: "
            + "; ".join(f"[{b['ref']}] {b['text']}" for b in snap["buttons"][:MAX_LISTED])
        )
    elements = truncated.get("elements")
    if elements:
        lines.append("")
        lines.append(
            f"... [listing truncated: first {elements['listed']} of "
            f"{elements['candidates']} links, fields and buttons]"
        )
    return "\n".join(lines)


class _StaleWorld(Exception):
    """The page's document changed under the listing (a navigation): list it again."""


#: DevTools errors of a frame or context that went away (a navigation under the listing)
_STALE = re.compile(r"context|frame|navigat", re.IGNORECASE)


async def _evaluate_isolated(page: Any, expression: str) -> Any:
    """``expression``'s value, evaluated in an isolated world of the page's main frame.

    An isolated world (Chromium's DevTools ``Page.createIsolatedWorld``, the kind extensions'
    content scripts get) shares the page's DOM but none of its JavaScript: its own globals
    and prototypes, its own DOM wrappers. A page that redefines ``String.prototype.slice``,
    ``Array.prototype.push``, the ``innerText`` getter or ``document.querySelectorAll``
    changes nothing here. The DevTools session is opened for this call and detached after
    it; the world (one per frame by its name) goes with the document.
    """
    session = await page.context.new_cdp_session(page)
    try:
        # a page target's id is its main frame's id (Target.getTargetInfo, unlike
        # Page.getFrameTree, does not list the page's iframes, however many there are)
        info = await session.send("Target.getTargetInfo")
        world = await session.send(
            "Page.createIsolatedWorld",
            {"frameId": info["targetInfo"]["targetId"], "worldName": SNAPSHOT_WORLD},
        )
        reply = await session.send(
            "Runtime.evaluate",
            {
                "expression": expression,
                "contextId": world["executionContextId"],
                "returnByValue": True,
                "timeout": SNAPSHOT_TIMEOUT_MS,
            },
        )
    except Exception as exc:  # noqa: BLE001 - Playwright's protocol errors
        message = (str(exc) or type(exc).__name__).splitlines()[0][:300]
        if _STALE.search(message):
            raise _StaleWorld(message) from None
        # e.g. "Execution was terminated": the listing overran SNAPSHOT_TIMEOUT_MS
        raise ToolError(f"the page could not be listed: {message}") from None
    finally:
        try:
            await session.detach()
        except Exception:  # noqa: BLE001 - the page (and its session) may be gone already
            pass
    if "exceptionDetails" in reply:
        details = reply["exceptionDetails"]
        message = details.get("exception", {}).get("description") or details.get("text")
        raise ToolError(f"the page could not be listed: {str(message)[:300]}")
    return reply.get("result", {}).get("value")


#: The start of a page's text, at most ``n`` characters (whitespace runs made one space),
#: read from its text nodes in document order (``script``, ``style``, ``noscript`` and
#: ``template`` left out) and at most ``nodes`` of them: no layout (``innerText`` lays the
#: page out, which for 50 MB of text takes longer than the action's time), no node's text
#: copied beyond what is kept, so the reply is bounded here, in the renderer, before it
#: crosses to the driver (issue 49: ``inner_text("body")`` of an error page carried its
#: whole 50 MB text into the driver and the harness, to be cut to 300 characters there).
_TEXT_HEAD_JS = r"""
(lim) => {
  const root = document.body || document.documentElement;
  if (!root) return '';
  const skip = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE']);
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  let out = '';
  for (let seen = 0; seen < lim.nodes && out.length <= lim.n; seen++) {
    const node = walker.nextNode();
    if (!node) break;
    const parent = node.parentElement;
    if (parent && skip.has(parent.tagName)) continue;
    // a slice first: a 50 MB text node is never copied or searched whole
    out += ' ' + node.data.slice(0, lim.n + 1 - out.length).replace(/\s+/g, ' ');
    out = out.replace(/\s+/g, ' ');
  }
  return out.trim().slice(0, lim.n);
}
"""
#: text nodes :data:`_TEXT_HEAD_JS` looks at, at most
TEXT_HEAD_NODES = 10_000


async def page_text_head(page: Any, chars: int) -> str:
    """The start of the page's visible text, at most ``chars`` characters, for an error
    message (an HTTP error page's own words): bounded in the renderer, in an isolated world
    (:func:`_evaluate_isolated`), and checked again here. Empty when the page cannot be
    read (its error is the tool's failure already)."""
    expression = f"({_TEXT_HEAD_JS})({json.dumps({'n': chars, 'nodes': TEXT_HEAD_NODES})})"
    try:
        value = await _evaluate_isolated(page, expression)
    except (ToolError, _StaleWorld):
        return ""
    return value[:chars] if isinstance(value, str) else ""


async def snapshot_page(page: Any, text_chars: int) -> str:
    """The page as the browser tools list it (elements numbered for targeting).

    The listing script runs in an isolated world (:func:`_evaluate_isolated`) and bounds
    what it sends back; :func:`sanitise_snapshot` bounds it again on this side."""
    expression = f"({_SNAPSHOT_JS})({json.dumps(_limits(text_chars))})"
    for attempt in range(3):
        await page.wait_for_load_state("domcontentloaded")
        try:
            raw = await _evaluate_isolated(page, expression)
            break
        except _StaleWorld as exc:
            if attempt == 2:
                raise ToolError(f"the page could not be listed: {exc}") from None
            await asyncio.sleep(0.1)
    return format_snapshot(sanitise_snapshot(raw, text_chars), text_chars)
