"""MkDocs hooks of the documentation site (mkdocs.yml): the README as the
home page, an API reference generated from each package's ``__all__``, and
every link kept working on the site.

* **Links.** docs/ pages link to files of the repository outside docs/
  (examples, benchmark results, the C headers), as they must for people who
  read them on a forge. On the site each such file is served too, under
  ``_repo/`` (Markdown rendered as a page, anything else as it is), and
  every relative link is rewritten from its repository path to its site
  path. A link to a file that does not exist stays as written, so strict
  mode reports it.
* **API reference.** One page per public name of the packages in
  :data:`PACKAGES` (mkdocstrings renders it from the docstrings, and for the
  compiled modules from their ``.pyi`` stubs and runtime docstrings), and an
  index page per package. A public class, function or module without a
  docstring of its own is a warning, so the strict build fails on it.
"""

import importlib
import inspect
import logging
import os
import posixpath
import re

from mkdocs.structure.files import File, InclusionLevel

log = logging.getLogger("mkdocs.plugins.a0py")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = "docs"
SOURCE_PREFIX = "_repo"
PACKAGES = ("a0py", "a0py.recording", "a0py.spark", "a0py.bridge", "a0py.view", "a0py.actor",
            "a0py.broker", "a0py.dataspace")
# Markdown links and images with a relative target: [text](target#anchor)
_LINK = re.compile(r"(!?\[[^\]]*\]\()([^)\s#]+)(#[^)\s]*)?(\))")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def _site_path(repo_path):
    """Where the repository file ``repo_path`` is on the site."""
    if repo_path == "README.md":
        return "index.md"
    if repo_path.startswith(DOCS + "/"):
        return repo_path[len(DOCS) + 1:]
    return f"{SOURCE_PREFIX}/{repo_path}"


def _repo_path(site_path):
    if site_path == "index.md":
        return "README.md"
    if site_path.startswith(SOURCE_PREFIX + "/"):
        return site_path[len(SOURCE_PREFIX) + 1:]
    return f"{DOCS}/{site_path}"


def _outside_links(text, repo_dir):
    """Repository paths of the existing files outside docs/ that ``text`` links to."""
    found = set()
    for m in _LINK.finditer(text):
        target = m.group(2)
        if _SCHEME.match(target) or target.startswith("/"):
            continue
        path = posixpath.normpath(posixpath.join(repo_dir, target))
        if path.startswith("..") or path.startswith(DOCS + "/"):
            continue
        if os.path.isfile(os.path.join(REPO, path)):
            found.add(path)
    return found


def _public(package):
    module = importlib.import_module(package)
    return list(getattr(module, "__all__", ()))


def _api_pages():
    """{site path: Markdown} of the API reference."""
    pages, rendered = {}, {}
    index = ["# API reference", "",
             "Every public name of a0py's packages, from its docstring (and, for the compiled",
             "modules, their `.pyi` stubs). The errors a call raises are in its docstring; the",
             "exception classes are the names of `a0py.errors`, listed under `a0py`.", ""]
    for package in PACKAGES:
        names = sorted(_public(package), key=str.lower)
        slug = package.replace(".", "/")
        index.append(f"- [`{package}`]({slug}/index.md): {len(names)} names")
        lines = [f"# `{package}`", "", f"::: {package}", "    options:", "      members: false",
                 "      show_root_heading: false", "", "| name | |", "|---|---|"]
        taken = set()
        for name in names:
            page = _page_name(name, taken)
            lines.append(f"| [`{name}`]({page}) | {_summary(package, name)} |")
            path = _doc_path(package, name)
            if path in rendered:  # one object exported by two packages: documented once
                first = posixpath.relpath(rendered[path], f"api/{slug}")
                body = f"The same object as [`{path}`]({first}), exported here too.\n"
            else:
                rendered[path] = f"api/{slug}/{page}"
                body = f"::: {path}\n    options:\n      show_root_heading: false\n"
            pages[f"api/{slug}/{page}"] = f"# `{package}.{name}`\n\n{body}"
        pages[f"api/{slug}/index.md"] = "\n".join(lines) + "\n"
    pages["api/index.md"] = "\n".join(index) + "\n"
    return pages


def _page_name(name, taken):
    """``NAME.md``, unique without regard to case (``Capture`` and ``capture``
    both exist, and a site unpacked on a case-insensitive disk must keep both)."""
    page, n = f"{name}.md", 1
    while page.lower() in taken:
        n += 1
        page = f"{name}-{n}.md"
    taken.add(page.lower())
    return page


def _doc_path(package, name):
    """The dotted path mkdocstrings finds ``package.name`` under. Its static
    analysis cannot follow a package's lazy ``__getattr__`` (``a0py`` loads its
    compiled core and protocols on first use), so a class or function is named
    by where it is defined (``a0py._core.Arena``: read from the ``.pyi`` stub),
    and a lazily exported constant by the module its package takes it from."""
    module = importlib.import_module(package)
    obj = getattr(module, name)
    if inspect.isclass(obj) or inspect.isroutine(obj):
        return f"{obj.__module__}.{obj.__qualname__}"
    for table, source in (("_CORE_NAMES", "._core"), ("_PACKET_NAMES", "._core"),
                          ("_PROTO_NAMES", ".proto")):
        if name in getattr(module, table, ()):
            return f"{package}{source}.{name}"
    return f"{package}.{name}"


def _summary(package, name):
    obj = getattr(importlib.import_module(package), name, None)
    doc = _own_doc(obj) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ").replace("|", "\\|")
    return first[:140] + ("…" if len(first) > 140 else "")


def _own_doc(obj):
    """The docstring ``obj`` has itself (not one inherited from a base class)."""
    doc = getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and doc is not None:
        inherited = [getattr(base, "__doc__", None) for base in obj.__mro__[1:]]
        if doc in inherited:
            return None
    return doc if isinstance(doc, str) and doc.strip() else None


def undocumented():
    """``[package.name]`` of the public classes, functions and modules without a
    docstring of their own (constants need none: the reference shows their value)."""
    missing = []
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in _public(package):
            obj = getattr(module, name, None)
            if (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)) \
                    and _own_doc(obj) is None:
                missing.append(f"{package}.{name}")
    return missing


def on_files(files, config):
    """Adds the home page, the API pages and the repository files the pages link to."""
    for path in undocumented():
        log.warning("public name %s has no docstring", path)
    readme = os.path.join(REPO, "README.md")
    with open(readme, encoding="utf-8") as f:
        files.append(File.generated(config, "index.md", content=f.read()))
    for path, content in _api_pages().items():
        # api/index.md is in the nav; the pages under it are reached from it
        inclusion = InclusionLevel.INCLUDED if path == "api/index.md" else InclusionLevel.NOT_IN_NAV
        files.append(File.generated(config, path, content=content, inclusion=inclusion))
    pending = [(f.src_uri, _read(f)) for f in files.documentation_pages() if f.abs_src_path]
    pending.append(("index.md", _read_path(readme)))
    seen = set()
    while pending:
        site_path, text = pending.pop()
        for repo_path in _outside_links(text, posixpath.dirname(_repo_path(site_path))):
            if repo_path in seen:
                continue
            seen.add(repo_path)
            target = _site_path(repo_path)
            abs_path = os.path.join(REPO, repo_path)
            if files.get_file_from_path(target) is not None:
                continue  # already on the site (a page of docs/, the home page)
            files.append(File.generated(config, target, abs_src_path=abs_path,
                                        inclusion=InclusionLevel.NOT_IN_NAV))
            if repo_path.endswith(".md"):
                pending.append((target, _read_path(abs_path)))
    return files


def _read(file):
    return _read_path(file.abs_src_path)


def _read_path(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def on_page_markdown(markdown, page, config, files):
    """Rewrites each relative link from its repository path to its site path."""
    site_dir = posixpath.dirname(page.file.src_uri)
    repo_dir = posixpath.dirname(_repo_path(page.file.src_uri))

    def rewrite(m):
        target = m.group(2)
        if _SCHEME.match(target) or target.startswith("/"):
            return m.group(0)
        repo_path = posixpath.normpath(posixpath.join(repo_dir, target))
        if repo_path.startswith("..") or not os.path.exists(os.path.join(REPO, repo_path)):
            return m.group(0)  # left for strict mode to report
        if os.path.isdir(os.path.join(REPO, repo_path)):
            return m.group(0)  # a folder of the repository: no page of its own on the site
        new = posixpath.relpath(_site_path(repo_path), site_dir or ".")
        return f"{m.group(1)}{new}{m.group(3) or ''}{m.group(4)}"

    return _LINK.sub(rewrite, markdown)

