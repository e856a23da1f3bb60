"""The JavaScript and CSS the HTML report inlines: the libraries from the installed Python packages that ship them
in their wheels (plotly.js in `plotly`, DataTables 2 with its Scroller in `itables`), and the page's own files
beside this module. Nothing is copied into the repository and nothing is fetched when a report is opened.

The packages are located without being imported (importing itables imports numpy and looks for pandas: 0.2 s).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import importlib.metadata
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tcmp.compare.records import CompareError

PAGE_FILES = Path(__file__).with_name("page_files")


@dataclass(frozen=True)
class Library:
    package: str  # the Python distribution shipping it
    version: str
    path: Path
    text: str


def _package_file(package: str, relative: str) -> Library:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CompareError(f"the HTML report needs the Python package {package} (pip install {package}), or --no-html")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CompareError(f"the HTML report needs {path} from the package {package}: {exc.strerror or exc}") from None
    return Library(package, importlib.metadata.version(package), path, text)


@functools.cache
def plotly_js() -> Library:
    """plotly.js, the bundle the plotly package writes into its own offline HTML files."""
    return _package_file("plotly", "package_data/plotly.min.js")


@functools.cache
def datatables_js() -> Library:
    """DataTables 2 with jQuery and its extensions (Scroller among them) as one ES module, as itables uses it
    offline; its default export is `DataTable`."""
    return _package_file("itables", "html/dt_bundle.js")


@functools.cache
def datatables_css() -> Library:
    return _package_file("itables", "html/dt_bundle.css")


@functools.cache
def page_file(name: str) -> str:
    """The page's own template, script or style (page_files/)."""
    return (PAGE_FILES / name).read_text(encoding="utf-8")


BASE64_TYPE = "application/x-tcmp-base64"  # a <script> block the page decodes itself (page_files/page.js)


DORMANT_TYPE = "text/x-tcmp-script"  # a script the page runs when it needs it (page_files/page.js)


# what would end an inline script early, as the HTML tokenizer sees it (ASCII letters in any case; `<!--`, after which
# the parser may take a later `<script` for a nested one): searched, not lowered, since a lowered plotly.js is
# one more copy of ~10 MB
_ENDS_INLINE_SCRIPT = re.compile("</script|<!--", re.IGNORECASE | re.ASCII)
_SLICE = 1 << 20  # characters encoded at a time where a text of megabytes is hashed or written


def script_parts(text: str, element_id: str, run: bool = True) -> tuple[str, ...]:
    """A classic script as an HTML element, in parts to be written one after the other (the text itself is one
    of them, not copied into a larger string): run where it stands or (`run` false) left for the page to run later;
    inline as it is, or, when the text holds `</script` or `<!--`, base64 in a block the page decodes (a third
    larger)."""
    if _ENDS_INLINE_SCRIPT.search(text) is None:
        kind = "" if run else f' type="{DORMANT_TYPE}"'
        return f'<script{kind} id="{element_id}">', text, "</script>"
    if run:
        raise ValueError(f"{element_id} holds </script or <!--: only a script the page runs later can be encoded")
    return (base64_element(text.encode("utf-8"), element_id),)


def script_element(text: str, element_id: str, run: bool = True) -> str:
    """`script_parts` as one string."""
    return "".join(script_parts(text, element_id, run))


def write_text(out, text: str) -> None:
    """`out.write(text)` a slice at a time: a text stream encodes what it is given whole, one more copy of it."""
    for start in range(0, len(text), _SLICE):
        out.write(text[start : start + _SLICE])


def base64_element(data: bytes, element_id: str) -> str:
    """Bytes in a <script> block that neither runs nor renders (base64 holds no `<`)."""
    return f'<script type="{BASE64_TYPE}" id="{element_id}">{base64.b64encode(data).decode("ascii")}</script>'


def script_hash(text: str) -> str:
    """A CSP hash source for an inline script: `'sha256-…'` of its text as the browser sees it (UTF-8)."""
    digest = hashlib.sha256()
    for start in range(0, len(text), _SLICE):  # slices of code points: their UTF-8 joins into the whole's
        digest.update(text[start : start + _SLICE].encode("utf-8"))
    return f"'sha256-{base64.b64encode(digest.digest()).decode('ascii')}'"


def csp_element(scripts: Sequence[str], eval_allowed: bool = False) -> str:
    """The page's Content-Security-Policy: nothing is fetched (`default-src 'none'`, `connect-src 'none'`); only
    the inline scripts given run, each allowed by its hash (never 'unsafe-inline': a name that reached the page as
    markup could not run); the page's own blob: URLs (DataTables' module, the inflating worker) run as scripts;
    styles inline (plotly sets its own). `eval_allowed` only for a chart drawn with WebGL (see page.SVG_POINTS):
    the plotly.js that the plotly package ships compiles its WebGL code at run time (its CSP-safe "strict" build
    is in no Python package); no code of the page evaluates a string it did not make itself."""
    hashes = " ".join(script_hash(text) for text in scripts)
    evaluated = " 'unsafe-eval'" if eval_allowed else ""
    policy = (
        f"default-src 'none'; script-src {hashes}{evaluated} blob:; style-src 'unsafe-inline'; img-src data: blob:; "
        "font-src data:; connect-src 'none'; worker-src blob:; form-action 'none'; base-uri 'none'"
    )
    return f'<meta http-equiv="Content-Security-Policy" content="{policy}">'


def style_element(text: str) -> str:
    """A style sheet inline, `</style` (which would end the element) written with its slash escaped, as CSS allows."""
    return "<style>" + re.sub("</(style)", r"<\/\1", text, flags=re.IGNORECASE) + "</style>"
