"""Runs the wiki evaluation through an edge with the official MCP Python SDK (issue 32).

Usage: evaluate.py URL KEYS_JSON CACHE_DIR HALVES REPORT_JSON [FLOORS_JSON]

KEYS_JSON maps "<genre>/<half>/<variant>" to a collector key of a fresh tenant; variants:
``main`` (the half with its planted defects), ``clean`` (the half's defect-free corpus: newest
documents only, nothing planted) and ``shuffled`` (the main documents ingested in another order:
equal pages must give equal answers). HALVES is "held-out" or "dev,held-out".

Prints one table per half (a column per genre) and writes every figure to REPORT_JSON. With
FLOORS_JSON, exits non-zero when a held-out figure is below its enforced floor; the goal column
of issue 32 is printed beside it.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
import sys
import time

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

import corpora

SOURCE = re.compile(r"sources/([a-z0-9][a-z0-9-]*)")


class Tenant:
    """One tenant driven through the edge."""

    def __init__(self, url: str, key: str):
        self.url, self.key = url, key

    async def __aenter__(self):
        self.http = create_mcp_http_client(headers={"Authorization": f"Bearer {self.key}"})
        await self.http.__aenter__()
        self.client_cm = Client(streamable_http_client(self.url, http_client=self.http), mode="auto")
        self.client = await self.client_cm.__aenter__()
        return self

    async def __aexit__(self, *exc):
        await self.client_cm.__aexit__(*exc)
        await self.http.__aexit__(*exc)

    async def call(self, arguments: dict) -> dict:
        result = await self.client.call_tool("client_wiki", arguments)
        text = result.content[0].text if result.content else ""
        if result.is_error:
            raise RuntimeError(f"client_wiki {arguments.get('action')} failed: {text}")
        return result.structured_content or {}

    async def ingest(self, doc: corpora.Doc) -> dict:
        arguments = {"action": "ingest", "source": {"type": "text", "text": doc.text, "source_label": doc.label}}
        if doc.as_of_arg:
            arguments["as_of"] = doc.as_of_arg
        if doc.subjects_arg:
            arguments["subjects"] = doc.subjects_arg
        return await self.call(arguments)

    async def query(self, question: str) -> tuple[dict, float]:
        started = time.perf_counter()
        out = await self.call({"action": "query", "question": question, "persist_output": False})
        return out, time.perf_counter() - started

    async def lint(self) -> list[dict]:
        out = await self.call({"action": "lint", "scope": "full", "publish_report": False})
        return out.get("findings", [])


def slug_of(receipt: dict) -> str:
    match = SOURCE.search(receipt.get("source", ""))
    if not match:
        raise RuntimeError(f"an ingest receipt names no source page: {receipt}")
    return match.group(1)


def cited(answer: dict) -> list[str]:
    """Source pages an answer cites, in order of first citation."""
    seen: list[str] = []
    for slug in SOURCE.findall(json.dumps(answer.get("citations", [])) + " " + answer.get("answer", "")):
        if slug not in seen:
            seen.append(slug)
    return seen


def refused(answer: dict) -> bool:
    return answer.get("answered") is False


def normal(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower().replace(",", "").replace("$", "")).strip()


def has_value(answer: str, values: list[str]) -> bool:
    text = normal(answer)
    return any(normal(v) and re.search(r"(?<![\w.])" + re.escape(normal(v)) + r"(?![\w])", text) for v in values)


async def ingest_all(tenant: Tenant, docs: list[corpora.Doc]) -> tuple[dict[str, dict], float]:
    receipts = {}
    started = time.perf_counter()
    for doc in docs:
        receipts[doc.key] = await tenant.ingest(doc)
    return receipts, time.perf_counter() - started


def matches(finding: dict, defect: corpora.Defect, slugs: dict[str, str]) -> bool:
    text = json.dumps(finding).lower()
    return all(slugs[k] in text for k in defect.docs) and any(w in text for w in defect.words)


async def run_part(url: str, keys: dict, genre: corpora.Genre, which: str) -> dict:
    part = genre.part(which)
    name = f"{genre.name}/{which}"
    order = sorted(part.docs, key=lambda d: d.key)
    random.Random(f"main:{name}").shuffle(order)
    shuffled = list(order)
    random.Random(f"second:{name}").shuffle(shuffled)
    clean = [d for d in order if d.clean]
    entity_of: dict[str, str | None] = {}
    figures: dict = {"documents": len(order), "questions": len(part.questions)}

    async with Tenant(url, keys[f"{name}/main"]) as main:
        receipts, took = await ingest_all(main, order)
        figures["ingest_docs_per_s"] = round(len(order) / took, 1)
        slugs = {k: slug_of(r) for k, r in receipts.items()}
        for doc in order:
            entity_of[slugs[doc.key]] = doc.entity
        answers, latencies = {}, []
        for q in part.questions:
            answers[q.text], took = await main.query(q.text)
            latencies.append(took)
        findings = await main.lint()
    async with Tenant(url, keys[f"{name}/clean"]) as tenant:
        await ingest_all(tenant, clean)
        clean_findings = await tenant.lint()
    async with Tenant(url, keys[f"{name}/shuffled"]) as tenant:
        await ingest_all(tenant, shuffled)
        second = {q.text: (await tenant.query(q.text))[0] for q in part.questions}

    answerable = [q for q in part.questions if q.entity is not None]
    unanswerable = [q for q in part.questions if q.entity is None]
    recall = []
    for q in answerable:
        top = cited(answers[q.text])[:5]
        expected = {slugs[k] for k in q.docs}
        recall.append(len(expected & set(top)) / len(expected))
    figures["strict_recall"] = round(statistics.mean(recall), 3) if recall else None
    with_values = [q for q in answerable if q.values]
    figures["newest"] = [sum(has_value(answers[q.text].get("answer", ""), q.values) for q in with_values), len(with_values)]
    figures["answerable_refused"] = [sum(refused(answers[q.text]) for q in answerable), len(answerable)]
    paraphrases = [q for q in answerable if q.kind == "paraphrase"]
    figures["paraphrases_refused"] = [sum(refused(answers[q.text]) for q in paraphrases), len(paraphrases)]
    figures["unanswerable_refused"] = [
        sum(refused(answers[q.text]) and not cited(answers[q.text]) for q in unanswerable), len(unanswerable)]
    figures["other_entity_cited"] = [
        sum(any(entity_of.get(s) not in (None, q.entity) for s in cited(answers[q.text])) for q in answerable),
        len(answerable)]

    def found(kind: str, rule: str) -> tuple[list, list]:
        planted = [d for d in part.defects if d.kind == kind]
        reported = [f for f in findings if f.get("rule") == rule]
        hits = [d for d in planted if any(matches(f, d, slugs) for f in reported)]
        right = [f for f in reported if any(matches(f, d, slugs) for d in planted)]
        return [len(hits), len(planted)], [len(right), len(reported)]

    figures["contradictions_found"], figures["contradiction_precision"] = found("contradiction", "contradiction")
    figures["superseded_found"], figures["superseded_precision"] = found("superseded", "stale_claim")
    figures["clean_errors_warnings"] = sum(f.get("severity") in ("error", "warning") for f in clean_findings)
    concept_pages = {c.lower() for r in receipts.values() for c in r.get("concepts", [])}
    figures["concepts_found"] = [
        sum(any(c in json.dumps(f).lower() for f in findings if f.get("rule") == "undocumented_concept")
            or c in concept_pages for c in part.concepts), len(part.concepts)]
    dated = [d for d in order if d.as_of]
    figures["dated_right"] = [sum(str(receipts[d.key].get("as_of") or "")[:7] == d.as_of[:7] for d in dated), len(dated)]
    same = sum(
        (answers[q.text].get("answer"), cited(answers[q.text])) == (second[q.text].get("answer"), cited(second[q.text]))
        for q in part.questions)
    figures["same_after_shuffle"] = [same, len(part.questions)]
    latencies.sort()
    figures["query_p50_ms"] = round(1000 * latencies[len(latencies) // 2], 1)
    figures["query_p99_ms"] = round(1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], 1)
    failures = []
    for q in answerable:
        a = answers[q.text]
        top = cited(a)[:5]
        expected = {slugs[k] for k in q.docs}
        if refused(a) or not expected <= set(top) or (q.values and not has_value(a.get("answer", ""), q.values)):
            failures.append({"question": q.text, "expected": sorted(expected), "values": q.values, "cited": top,
                             "answer": a.get("answer", "")[:400]})
    figures["_failures"] = failures[:40]
    figures["_other_entity"] = [
        {"question": q.text, "cited": cited(answers[q.text]), "answer": answers[q.text].get("answer", "")[:400]}
        for q in answerable
        if any(entity_of.get(s) not in (None, q.entity) for s in cited(answers[q.text]))
    ][:20]
    figures["_findings"] = [f for f in findings if f.get("severity") in ("error", "warning")][:40]
    figures["_clean_findings"] = [f for f in clean_findings if f.get("severity") in ("error", "warning")][:20]
    return figures


ROWS = [
    ("strict_recall", "cited source pages among the top 5 (strict recall)"),
    ("newest", "answers containing the newest value"),
    ("answerable_refused", "answerable questions refused"),
    ("paraphrases_refused", "of which paraphrases"),
    ("unanswerable_refused", "unanswerable questions refused, citing nothing"),
    ("other_entity_cited", "answers citing another entity's pages"),
    ("contradictions_found", "planted contradictions found by lint"),
    ("contradiction_precision", "contradiction findings that are planted ones"),
    ("clean_errors_warnings", "errors and warnings on the corpus with no defect"),
    ("superseded_found", "superseded facts found"),
    ("superseded_precision", "stale findings that are superseded facts"),
    ("concepts_found", "recurring concepts without a page found"),
    ("dated_right", "documents dated right (month)"),
    ("same_after_shuffle", "same answers after a shuffled ingest"),
    ("query_p50_ms", "query p50 through the edge (ms)"),
    ("ingest_docs_per_s", "ingest rate (documents/s)"),
]


def show(value) -> str:
    if isinstance(value, list):
        return f"{value[0]} of {value[1]}"
    return "—" if value is None else str(value)


def ratio(value) -> float | None:
    """A figure as a fraction (1.0 when there is nothing to count)."""
    if isinstance(value, list):
        return value[0] / value[1] if value[1] else 1.0
    return value


def check(report: dict, floors: dict) -> list[str]:
    """Enforced floors on held-out halves: 'at_least' fractions, 'at_most' fractions or counts."""
    broken = []
    for column, figures in report.items():
        if not column.endswith("/" + corpora.HELD_OUT):
            continue
        for rule in floors["enforced"]:
            figure, bound, kind = rule["figure"], rule["value"], rule["kind"]
            if rule.get("genres") and column.split("/")[0] not in rule["genres"]:
                continue
            value = ratio(figures[figure])
            if value is None:
                continue
            if (kind == "at_least" and value < bound) or (kind == "at_most" and value > bound):
                broken.append(f"{column}: {figure} = {show(figures[figure])} ({value:.3f}), floor {kind} {bound}")
    return broken


def goal_met(figures: dict, goals: list[dict]) -> list[str]:
    missed = []
    for rule in goals:
        value = ratio(figures.get(rule["figure"]))
        if value is None:
            continue
        if (rule["kind"] == "at_least" and value < rule["value"]) or (rule["kind"] == "at_most" and value > rule["value"]):
            missed.append(rule["figure"])
    return missed


async def main() -> int:
    url, keys_file, cache, halves, report_file = sys.argv[1:6]
    floors = json.load(open(sys.argv[6])) if len(sys.argv) > 6 else None
    keys = json.load(open(keys_file))
    genres = corpora.build(cache)
    report: dict = {}
    for which in halves.split(","):
        runs = await asyncio.gather(*(run_part(url, keys, g, which) for g in genres))
        for g, figures in zip(genres, runs):
            report[f"{g.name}/{which}"] = figures
    json.dump(report, open(report_file, "w"), indent=1)
    for which in halves.split(","):
        columns = [c for c in report if c.endswith("/" + which)]
        print(f"\n### wiki evaluation, {which} half (issue 32)\n")
        print("| figure | " + " | ".join(c.split("/")[0] for c in columns) + " | goal |")
        print("|---|" + "---|" * (len(columns) + 1))
        goals = {r["figure"]: r for r in (floors or {}).get("goal", [])}
        for key, label in ROWS:
            goal = goals.get(key)
            shown = f"{'≥' if goal['kind'] == 'at_least' else '≤'} {goal['value']}" if goal else ""
            print(f"| {label} | " + " | ".join(show(report[c][key]) for c in columns) + f" | {shown} |")
        if floors:
            for c in columns:
                missed = goal_met(report[c], floors["goal"])
                print(f"{c}: goal {'met' if not missed else 'NOT met: ' + ', '.join(missed)}")
    if floors:
        broken = check(report, floors)
        for line in broken:
            print("FLOOR BROKEN:", line)
        return 1 if broken else 0
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
