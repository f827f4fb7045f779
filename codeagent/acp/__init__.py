"""`codeagent acp`: editors (Zed and other Agent Client Protocol clients) drive codeagent's interactive
session over stdio. One more client of run/session/ beside the TUI: the same Session, approvals and events."""
