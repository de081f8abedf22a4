"""The PubMed mimic: NCBI E-utilities' ``esearch``, ``esummary`` and ``efetch``.

JSON or XML search results, JSON document summaries, and PubMed XML (or plain-text)
records, with E-utilities' error shapes: some errors are HTTP 200 with an ``ERROR``
field, some HTTP 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from mastif.web.mimics.common import (
    all_params,
    int_param,
    match_score,
    query_terms,
    stemmed_tokens,
)

_PUBTYPE_UI = {
    "Journal Article": "D016428",
    "Randomized Controlled Trial": "D016449",
    "Meta-Analysis": "D017418",
    "Systematic Review": "D000078182",
    "Observational Study": "D064888",
    "Comparative Study": "D003160",
    "Evaluation Study": "D023362",
}
_MONTHS = ("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec").split()
_EUTILS_HEADER_VERSION = "0.3"
_PUBMED_DOCTYPE = (
    '<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" '
    '"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">'
)


def _pubmed_text(article: Mapping[str, Any]) -> str:
    authors = " ".join(f"{a['last']} {a['fore']}" for a in article["authors"])
    abstract = " ".join(part["text"] for part in article["abstract"])
    keywords = " ".join(article.get("keywords", []))
    return f"{article['journal']} {authors} {abstract} {keywords}"


def _pubmed_matches(article: Mapping[str, Any], term: str) -> int:
    """PubMed-ish: ``[field]`` tags ignored, groups split on OR, NOT excludes, AND implied."""
    cleaned = re.sub(r"\[[^\]]*\]", " ", term)
    best = 0
    for group in re.split(r"\bOR\b", cleaned):
        positive, _, negative = group.partition(" NOT ")
        positive = re.sub(r"\bAND\b", " ", positive)
        fields = [(article["title"], 3), (_pubmed_text(article), 1)]
        score = match_score(query_terms(positive), fields)
        if score and negative.strip() and match_score(query_terms(negative), fields):
            score = 0
        best = max(best, score)
    return best


def _sortpubdate(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    month = _MONTHS.index(date["month"]) + 1 if date.get("month") in _MONTHS else 1
    return f"{date['year']}/{month:02d}/{int(date.get('day') or 1):02d} 00:00"


def _pubdate_str(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    return " ".join(x for x in (date["year"], date.get("month"), date.get("day")) if x)


def _eutils_json(payload: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(payload, status_code=status, media_type="application/json; charset=UTF-8")


def _eutils_xml(body: str, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="text/xml; charset=UTF-8")


def _efetch_article_xml(article: Mapping[str, Any]) -> str:
    date = article["pubdate"]
    date_xml = "".join(
        f"<{tag}>{escape(date[key])}</{tag}>"
        for tag, key in (("Year", "year"), ("Month", "month"), ("Day", "day"))
        if date.get(key)
    )
    first, _, last = article["pages"].partition("-")
    abstract = "".join(
        (
            f"<AbstractText Label={quoteattr(part['label'])} "
            f"NlmCategory={quoteattr(part['label'])}>{escape(part['text'])}</AbstractText>"
        )
        if part.get("label")
        else f"<AbstractText>{escape(part['text'])}</AbstractText>"
        for part in article["abstract"]
    )
    authors = "".join(
        '<Author ValidYN="Y">'
        f"<LastName>{escape(a['last'])}</LastName><ForeName>{escape(a['fore'])}</ForeName>"
        f"<Initials>{escape(a['initials'])}</Initials></Author>"
        for a in article["authors"]
    )
    pubtypes = "".join(
        (
            f'<PublicationType UI="{_PUBTYPE_UI[p]}">{escape(p)}</PublicationType>'
            if p in _PUBTYPE_UI
            else f"<PublicationType>{escape(p)}</PublicationType>"
        )
        for p in article.get("pubtypes", ["Journal Article"])
    )
    keywords = "".join(
        f'<Keyword MajorTopicYN="N">{escape(k)}</Keyword>' for k in article.get("keywords", [])
    )
    doi = article.get("doi", "")
    return (
        "<PubmedArticle>"
        '<MedlineCitation Status="MEDLINE" Owner="NLM" IndexingMethod="Automated">'
        f'<PMID Version="1">{article["pmid"]}</PMID>'
        '<Article PubModel="Print-Electronic"><Journal>'
        f'<ISSN IssnType="Electronic">{escape(article.get("issn", ""))}</ISSN>'
        '<JournalIssue CitedMedium="Internet">'
        f"<Volume>{escape(article['volume'])}</Volume><Issue>{escape(article['issue'])}</Issue>"
        f"<PubDate>{date_xml}</PubDate></JournalIssue>"
        f"<Title>{escape(article['journal'])}</Title>"
        f"<ISOAbbreviation>{escape(article['iso_abbrev'])}</ISOAbbreviation></Journal>"
        f"<ArticleTitle>{escape(article['title'])}</ArticleTitle>"
        f"<Pagination><StartPage>{escape(first)}</StartPage>"
        + (f"<EndPage>{escape(last)}</EndPage>" if last else "")
        + f"<MedlinePgn>{escape(article['pages'])}</MedlinePgn></Pagination>"
        + (f'<ELocationID EIdType="doi" ValidYN="Y">{escape(doi)}</ELocationID>' if doi else "")
        + f"<Abstract>{abstract}</Abstract>"
        f'<AuthorList CompleteYN="Y">{authors}</AuthorList>'
        "<Language>eng</Language>"
        f"<PublicationTypeList>{pubtypes}</PublicationTypeList></Article>"
        "<MedlineJournalInfo><Country>Oskaria</Country>"
        f"<MedlineTA>{escape(article['iso_abbrev'])}</MedlineTA></MedlineJournalInfo>"
        + (f'<KeywordList Owner="NOTNLM">{keywords}</KeywordList>' if keywords else "")
        + "</MedlineCitation><PubmedData><PublicationStatus>ppublish</PublicationStatus>"
        f'<ArticleIdList><ArticleId IdType="pubmed">{article["pmid"]}</ArticleId>'
        + (f'<ArticleId IdType="doi">{escape(doi)}</ArticleId>' if doi else "")
        + "</ArticleIdList></PubmedData></PubmedArticle>"
    )


def _efetch_article_text(index: int, article: Mapping[str, Any]) -> str:
    authors = ", ".join(f"{a['last']} {a['initials']}" for a in article["authors"])
    abstract = "\n\n".join(
        f"{part['label']}: {part['text']}" if part.get("label") else part["text"]
        for part in article["abstract"]
    )
    doi = f" doi: {article['doi']}." if article.get("doi") else ""
    return (
        f"{index}. {article['iso_abbrev']}. {_pubdate_str(article)};{article['volume']}"
        f"({article['issue']}):{article['pages']}.{doi}\n\n{article['title']}\n\n{authors}.\n\n"
        f"{abstract}\n\nPMID: {article['pmid']}\n"
    )


def _esummary_doc(article: Mapping[str, Any]) -> dict[str, Any]:
    authors = [
        {"name": f"{a['last']} {a['initials']}", "authtype": "Author", "clusterid": ""}
        for a in article["authors"]
    ]
    articleids = [{"idtype": "pubmed", "idtypen": 1, "value": article["pmid"]}]
    if article.get("doi"):
        articleids.append({"idtype": "doi", "idtypen": 3, "value": article["doi"]})
    return {
        "uid": article["pmid"],
        "pubdate": _pubdate_str(article),
        "epubdate": "",
        "source": article["iso_abbrev"],
        "authors": authors,
        "lastauthor": authors[-1]["name"] if authors else "",
        "title": article["title"],
        "sorttitle": article["title"].lower().rstrip("."),
        "volume": article["volume"],
        "issue": article["issue"],
        "pages": article["pages"],
        "lang": ["eng"],
        "nlmuniqueid": "",
        "issn": "",
        "essn": article.get("issn", ""),
        "pubtype": list(article.get("pubtypes", ["Journal Article"])),
        "recordstatus": "PubMed - indexed for MEDLINE",
        "pubstatus": "4",
        "articleids": articleids,
        "history": [],
        "references": [],
        "attributes": ["Has Abstract"],
        "pmcrefcount": "",
        "fulljournalname": article["journal"],
        "elocationid": f"doi: {article['doi']}" if article.get("doi") else "",
        "doctype": "citation",
        "srccontriblist": [],
        "booktitle": "",
        "medium": "",
        "edition": "",
        "publisherlocation": "",
        "publishername": "",
        "srcdate": "",
        "reportnumber": "",
        "availablefromurl": "",
        "locationlabel": "",
        "doccontriblist": [],
        "docdate": "",
        "bookname": "",
        "chapter": "",
        "sortpubdate": _sortpubdate(article),
        "sortfirstauthor": authors[0]["name"] if authors else "",
        "vernaculartitle": "",
    }


def _header(kind: str) -> dict[str, str]:
    return {"type": kind, "version": _EUTILS_HEADER_VERSION}


def _ids_of(params: Mapping[str, str]) -> list[str]:
    return [i.strip() for i in params.get("id", "").split(",") if i.strip()]


class PubMed:
    """The three E-utilities over one corpus of articles."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.articles: list[dict[str, Any]] = list(data["articles"])
        self.by_pmid = {a["pmid"]: a for a in self.articles}

    async def esearch(self, request: Request) -> Response:
        params = await all_params(request)
        as_json = params.get("retmode", "xml") == "json"
        db = params.get("db", "pubmed")
        term = params.get("term", "").strip()
        error = None
        if db != "pubmed":
            error = f"Invalid db name specified: {db}"
        elif not term:
            error = "Empty term and query_key - nothing todo"
        try:
            retmax = min(max(int_param(params, "retmax", 20), 0), 10000)
            retstart = max(int_param(params, "retstart", 0), 0)
        except ValueError:
            error = error or "Invalid retmax or retstart value"
            retmax, retstart = 20, 0
        if error:
            if as_json:
                return _eutils_json(
                    {"header": _header("esearch"), "esearchresult": {"ERROR": error}}
                )
            return _eutils_xml(
                '<?xml version="1.0" encoding="UTF-8" ?>\n'
                f"<eSearchResult><ERROR>{escape(error)}</ERROR></eSearchResult>"
            )
        scored = [(s, a) for a in self.articles if (s := _pubmed_matches(a, term))]
        if params.get("sort", "relevance") == "relevance":
            scored.sort(key=lambda pair: -pair[0])
        else:  # "pub_date" and the other orders: newest first
            scored.sort(key=lambda pair: _sortpubdate(pair[1]), reverse=True)
        ids = [a["pmid"] for _, a in scored][retstart : retstart + retmax]
        words = query_terms(re.sub(r"\[[^\]]*\]|\b(AND|OR|NOT)\b", " ", term))
        translation = " AND ".join(f'"{w}"[All Fields]' for w in words)
        result: dict[str, Any] = {
            "count": str(len(scored)),
            "retmax": str(len(ids)),
            "retstart": str(retstart),
            "idlist": ids,
            "translationset": [],
            "querytranslation": translation,
        }
        if not scored:
            everything = " ".join(f"{a['title']} {_pubmed_text(a)}" for a in self.articles)
            known = set(stemmed_tokens(everything))
            missing = [w for w in words if w not in known]
            if missing:
                result["errorlist"] = {"phrasesnotfound": missing, "fieldsnotfound": []}
            result["warninglist"] = {
                "phrasesignored": [],
                "quotedphrasesnotfound": [],
                "outputmessages": ["No items found."],
            }
        if as_json:
            return _eutils_json({"header": _header("esearch"), "esearchresult": result})
        id_xml = "".join(f"<Id>{i}</Id>" for i in ids)
        return _eutils_xml(
            '<?xml version="1.0" encoding="UTF-8" ?>\n'
            '<!DOCTYPE eSearchResult PUBLIC "-//NLM//DTD esearch 20060628//EN" '
            '"https://eutils.ncbi.nlm.nih.gov/eutils/dtd/20060628/esearch.dtd">\n'
            f"<eSearchResult><Count>{len(scored)}</Count><RetMax>{len(ids)}</RetMax>"
            f"<RetStart>{retstart}</RetStart><IdList>{id_xml}</IdList><TranslationSet/>"
            f"<QueryTranslation>{escape(translation)}</QueryTranslation></eSearchResult>"
        )

    async def esummary(self, request: Request) -> Response:
        params = await all_params(request)
        if params.get("retmode", "xml") != "json":
            return _eutils_xml(
                '<?xml version="1.0" encoding="UTF-8" ?>\n<eSummaryResult><ERROR>This sandbox '
                "mimic serves esummary as retmode=json only</ERROR></eSummaryResult>",
                status=400,
            )
        if params.get("db", "pubmed") != "pubmed":
            db = params.get("db")
            return _eutils_json(
                {"header": _header("esummary"), "error": f"Invalid db name specified: {db}"}
            )
        ids = _ids_of(params)
        if not ids:
            return _eutils_json(
                {"header": _header("esummary"), "error": "Empty id list - nothing todo"}
            )
        result: dict[str, Any] = {"uids": ids}
        for pmid in ids:
            article = self.by_pmid.get(pmid)
            result[pmid] = (
                _esummary_doc(article)
                if article
                else {"uid": pmid, "error": "cannot get document summary"}
            )
        return _eutils_json({"header": _header("esummary"), "result": result})

    async def efetch(self, request: Request) -> Response:
        params = await all_params(request)
        db = params.get("db", "")
        ids = _ids_of(params)
        if db != "pubmed":
            message = f"Invalid db name specified: {db}" if db else "Database name is not set"
            return _eutils_xml(
                f"<eFetchResult><ERROR>{escape(message)}</ERROR></eFetchResult>", status=400
            )
        if not ids:
            return _eutils_xml(
                "<eFetchResult><ERROR>Empty id list - nothing todo</ERROR></eFetchResult>",
                status=400,
            )
        found = [self.by_pmid[i] for i in ids if i in self.by_pmid]
        if params.get("retmode", "xml") == "text":
            text = "\n\n".join(_efetch_article_text(n, a) for n, a in enumerate(found, start=1))
            return Response(text, media_type="text/plain; charset=UTF-8")
        body = (
            '<?xml version="1.0" ?>\n'
            + _PUBMED_DOCTYPE
            + "\n<PubmedArticleSet>"
            + "".join(_efetch_article_xml(a) for a in found)
            + "</PubmedArticleSet>\n"
        )
        return _eutils_xml(body)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/esearch.fcgi", self.esearch, methods=["GET", "POST"]),
            Route("/esummary.fcgi", self.esummary, methods=["GET", "POST"]),
            Route("/efetch.fcgi", self.efetch, methods=["GET", "POST"]),
        ]
