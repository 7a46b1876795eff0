"""The starter ``.knowledge/config.yaml`` that ``agentic-knowledge new`` writes.

It is valid as written: one local docset for the project's own documentation (its docs
folder when it has one, else the project folder with its README), so ``list_docsets`` and
``search_docs`` answer at once. Everything else is commented out, every field explained,
and each commented example is valid once its ``#`` is removed (a test uncomments them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from agentloom.packs.docs.config import CONFIG_NAME, DEFAULT_TEMPLATE, KNOWLEDGE_DIR

DOC_FOLDERS = ("docs", "doc", "documentation", "Documentation")
STARTER_DOCSET = "project"


@dataclass(frozen=True)
class Starter:
    path: Path  # the file written
    docset: str  # the one active docset
    local_path: str  # its local_path as written in the file


def local_folder(root: Path) -> str:
    """The project's documentation folder (``docs/`` ...), else the project folder itself."""
    for name in DOC_FOLDERS:
        if (root / name).is_dir():
            return f"{name}/"
    return "./"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=True)  # a JSON string is a valid YAML double-quoted scalar


def starter_text(root: Path) -> str:
    folder = local_folder(root)
    where = f"the {folder} folder" if folder != "./" else "the project folder (its README and other files)"
    description = f"The documentation of {root.absolute().name or 'this project'}"
    default_template = _quoted(DEFAULT_TEMPLATE)
    return f"""\
# .knowledge/config.yaml: the documentation sets ("docsets") this project offers to AI assistants.
#
# An assistant calls list_docsets to see the docsets below, then search_docs with a docset and
# keywords; the answer tells it which folder to search with its own text-search tools. Changes
# to this file are picked up on the next call, without restarting anything.
#
# Commands (`agentloom docs ...` runs the same ones):
#   agentic-knowledge status           every docset, its folder, and when its web sources were fetched
#   agentic-knowledge init NAME        download the web_sources of docset NAME (see the examples below)
#   agentic-knowledge refresh [NAME]   fetch web sources again; only changed files are rewritten
# An MCP client starts `agentic-knowledge-mcp` (or `agentloom serve`) in this project to get
# search_docs and list_docsets.

# Where docsets with neither local_path nor web_sources keep their files:
# {{docs_root}}/{{name}}-{{version}}/ (or {{docs_root}}/{{name}}/ without a version). A relative path
# is relative to the project folder, the one that contains .knowledge. Default: .knowledge/docs
# docs_root: .knowledge/docs

# The instruction search_docs answers with, for every docset without a template of its own.
# Variables: {{keywords}} and {{generalized_keywords}} (each list joined with ", "), {{local_path}},
# {{docset}} and {{version}}; any other {{name}} is left as it is. Default:
# template: {default_template}

docsets:
  # This project's own documentation, in {where}. It works as it is: nothing to download.
  # The name is what assistants pass to search_docs: 1 to 100 letters, digits, '.', '_' or '-'.
  - name: {STARTER_DOCSET}
    # Shown by list_docsets, so that an assistant knows when to use this docset.
    description: {_quoted(description)}
    # The folder holding the files: relative to the project folder, or absolute.
    local_path: {_quoted(folder)}
    # Optional; kept as text, so 18.10 stays 18.10. Without a local_path the folder would be
    # {{docs_root}}/{{name}}-{{version}}/.
    # version: "1.0"
    # Optional: other names that search_docs and the commands accept. Names and aliases are unique.
    # aliases: [docs]

  # A docset downloaded from a git repository: `agentic-knowledge init fastapi`. Without a
  # local_path its files go to .knowledge/docsets/fastapi/, which the .knowledge/.gitignore
  # written by the first download keeps out of version control.
  # - name: fastapi
  #   version: "0.115"
  #   aliases: [fast-api]
  #   description: "FastAPI: the tutorial and the user guide"
  #   # Where the files come from. Each source is fetched on its own: one failing never stops the others.
  #   web_sources:
  #     # The only source type: a git repository, cloned with your git (its credentials and SSH keys apply).
  #     - type: git_repo
  #       # https://, http://, ssh://, git://, git@host:owner/repo.git or file:///path/to/repo
  #       url: https://github.com/fastapi/fastapi.git
  #       # Optional; default: the repository's default branch.
  #       branch: master
  #       # Optional: exactly these files and folders. Without paths the documentation is picked:
  #       # .md, .mdx, .rst and .txt files, README files, and everything under docs/, documentation/,
  #       # guides/, examples/ and tutorials/; never src/, lib/, build/, dist/, vendor/, node_modules/
  #       # and the like, nor CHANGELOG, LICENSE, CONTRIBUTING, binaries or files over 1 MB.
  #       paths: [docs/en/docs]

  # A web docset with a folder and an instruction of its own, its source options in the nested form.
  # - name: handbook
  #   # Downloads go here; it must be inside the project folder unless allow_outside_project is true.
  #   local_path: vendor/handbook/
  #   # true lets downloads write to a local_path outside the project folder. Default: false
  #   allow_outside_project: false
  #   # This docset's own instruction, with the same variables as the template above.
  #   template: "Read {{local_path}}README.md first, then search {{local_path}} for '{{keywords}}'."
  #   web_sources:
  #     - type: git_repo
  #       url: git@github.com:example/handbook.git
  #       # branch and paths may also be given under options:, as here.
  #       options:
  #         branch: main
  #         paths: [handbook/, README.md]

  # A docset whose files you put in place yourself, in {{docs_root}}/{{name}}-{{version}}/: here
  # .knowledge/docs/react-18.2/ (`agentic-knowledge init react` creates the folder).
  # - name: react
  #   version: "18.2"
  #   aliases: [reactjs]
"""


def config_path(root: Path) -> Path:
    return root / KNOWLEDGE_DIR / CONFIG_NAME


def write_starter(root: Path) -> Starter:
    """Write the starter into ``root/.knowledge/config.yaml``; raises FileExistsError when a file is there."""
    path = config_path(root)
    text = starter_text(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as out:  # never replaces a file, even one made a moment ago
        out.write(text)
    return Starter(path, STARTER_DOCSET, local_folder(root))
