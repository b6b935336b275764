"""`dlltrace check`'s outputs for CI systems: GitHub Actions workflow-command annotations (`--format github`) and a
JUnit XML report (`--junit-xml FILE`), made from diagnosis/static.py's CheckResult only.

GitHub: one `::error file=F,line=L,title=T::MESSAGE` per problem (a DLL that fails, a bad file; a `::notice` for
one of a file loaded only on demand, which fails nothing), F the wheel member
that needs the DLL (or is bad) and L the line of the wheel's RECORD that lists it; escaped as GitHub's runner reads
them (actions/toolkit command.ts: in the message %, CR and LF become %25, %0D, %0A; in a property value `:` and
`,` too, %3A and %2C), so a hostile member name can neither end the command nor start another.

JUnit: a <testsuite> per target, a <testcase> per binary checked (classname: the distribution, name: the member),
a <failure> in it for each problem of that binary; a problem of the package as a whole (nothing to check, mixed
CUDA majors) is a testcase named after the wheel itself. The elements and attributes Jenkins' and GitLab's JUnit
readers take (testsuites/testsuite/testcase/failure with name, classname, file, tests, failures, errors, skipped,
time, message, type).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from typing import Optional

from dlltrace.diagnosis.static import CheckResult, FileRow, Problem
from dlltrace.render.optional import optional_words
from dlltrace.render.static import check_summary, record_words
from dlltrace.render.escape import escape_lines, escape_terminal


def escape_data(s: str) -> str:
    """A workflow command's message (GitHub's escapeData)."""
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    """A workflow command's property value (GitHub's escapeProperty)."""
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _file_of(r: CheckResult, p: Problem) -> tuple[str, Optional[int]]:
    """The file a problem is about (the first binary that needs the DLL, or the bad binary), as the wheel lists it,
    and the line of RECORD that lists it; a problem of no one file: the target given, no line."""
    by_path = {f.path: f for f in r.files}
    for cand in [*(p.needed_by[:1]), *([p.path] if p.path else [])]:
        row: Optional[FileRow] = by_path.get(cand)
        if row is not None:
            if row.member is not None:
                return row.member, row.record_line
            return os.path.join(r.target.given, *row.path.split("\\")), None
    return r.target.given, None


def problem_message(r: CheckResult, p: Problem) -> str:
    """The problem in one line: the DLL, the words, and every file that needs it (as the wheel names them)."""
    head = f"{p.dll}: " if p.dll and not p.detail.startswith(p.dll) else ""
    names = {f.path: f.member for f in r.files if f.member}
    by = [names.get(x, x) for x in p.needed_by]
    needed = f" (needed by {', '.join(by[:5])}{' and more' if len(by) > 5 else ''})" if len(by) > 1 else ""
    return head + p.detail + record_words(p) + needed


def github_annotations(results: list[CheckResult]) -> str:
    """One ::error line per problem of every result, one ::notice line per problem of a file loaded only on demand
    (CheckResult.optional_problems: no failure, but a defect of the wheel the run's summary shows), then each
    result's summary line (plain text)."""
    out: list[str] = []
    for r in results:
        for level, p in [*(("error", p) for p in r.problems), *(("notice", p) for p in r.optional_problems)]:
            f, line = _file_of(r, p)
            title = "dlltrace check: " + p.kind.replace("_", " ") + (" (optional file)" if level == "notice" else "")
            props = f"file={escape_property(escape_terminal(f))}" + (f",line={line}" if line else "") + \
                f",title={escape_property(title)}"
            words = problem_message(r, p) + (f"; optional ({optional_words(p.optional_by)}): the package does without it"
                                             if level == "notice" else "")
            out.append(f"::{level} {props}::{escape_data(escape_lines(words))}")
    for r in results:  # (a name's ESC sequence or bidi control shown as its escape: a log is a terminal too)
        out.append(escape_lines(check_summary(r)).replace("\r", " ").replace("\n", " "))
    return "\n".join(out) + "\n"


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _x(s: str) -> str:
    """Text XML 1.0 can hold (a control character in a member's name becomes \\xNN)."""
    return _XML_BAD.sub(lambda m: f"\\x{ord(m.group()):02x}", s)


def junit_xml(results: list[CheckResult]) -> str:
    suites = ET.Element("testsuites", name="dlltrace check")
    total = failed = 0
    for r in results:
        given = os.path.basename(r.target.given.rstrip("/\\")) or r.target.given
        klass = r.target.dist or given
        cases: dict[str, ET.Element] = {}
        fails: dict[str, int] = {}
        suite = ET.SubElement(suites, "testsuite", name=_x(given), errors="0", skipped="0", time="0")
        for f in r.files:
            name = f.member or f.path.replace("\\", "/")
            attrs = {"classname": _x(klass), "name": _x(name), "time": "0"}
            if f.member:
                attrs["file"] = _x(f.member)
            cases[f.path] = ET.SubElement(suite, "testcase", attrs)
        for p in r.problems:
            where = [x for x in p.needed_by if x in cases] or ([p.path] if p.path in cases else []) or [""]
            for w in dict.fromkeys(where):
                if w not in cases:  # (a problem of the package as a whole: a testcase named after it)
                    cases[w] = ET.SubElement(suite, "testcase", classname=_x(klass), name=_x(given), time="0")
                case = cases[w]
                fail = ET.SubElement(case, "failure", message=_x(problem_message(r, p)), type=p.kind)
                fail.text = _x(problem_message(r, p))
                fails[w] = 1
        if not cases:  # (a wheel with no binary, passed with --allow-pure: one passing testcase for it)
            cases[""] = ET.SubElement(suite, "testcase", classname=_x(klass), name=_x(given), time="0")
        tests, nfail = len(cases), len(fails)
        suite.set("tests", str(tests))
        suite.set("failures", str(nfail))
        total += tests
        failed += nfail
    suites.set("tests", str(total))
    suites.set("failures", str(failed))
    suites.set("errors", "0")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
