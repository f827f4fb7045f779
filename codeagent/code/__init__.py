"""Code navigation and localization (tree-sitter).

Modules, one job each (import what you need; nothing heavy is imported here):
  languages   the table of languages: extensions, grammar, tree-sitter queries
  parsing     parse bytes by extension; tolerate syntax errors (`ParsedFile.has_errors`)
  outline     `outline(path | source=...)` -> classes/functions/methods with qualified names and lines
  files       which files of a repository to index
  tags        per-file definitions, references and imports (cacheable by content digest)
  index       `RepoIndex(root)`: `find_definitions(name)`, `find_references(name)`
  repomap     `RepoMap(index)`: personalised PageRank over files; `render(token_budget)`
  mentions    paths, stack-trace frames and identifiers in an issue text
  resolve     match mentioned paths / dotted names / imports to repository files
  retrieval   BM25 (bm25s) over function/class/module chunks
  localize    `localize(repo_dir, issue_text, k)` -> ranked `FileCandidate`s (fusion of the above)
"""
