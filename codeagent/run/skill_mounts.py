"""Skills' folders in the sandbox: each skill a session may use is mounted read-only at
/opt/codeagent/skills/NAME (a Docker sandbox; a local sandbox runs on this machine, where the folder is), so
that the commands its SKILL.md gives (`bash scripts/check.sh`) run there, under the usual approval. The
same skills as the agent's (tools/skill.py): the user's, and a trusted repository's."""

from __future__ import annotations

from ..config import Config, repository_trusted, user_config_folder
from ..tools.skill import SANDBOX_SKILLS, find_skills, skill_roots


def with_skill_folders(options: dict, config: Config, repo: str) -> dict:
    """`sandbox_options(...)` with the skills' folders mounted read-only (Docker only)."""
    if options.get("kind") != "docker" or (config.agent.tools and "skill" not in config.agent.tools):
        return options  # a local sandbox reads the folders where they are; no skill tool, no skills
    skills = find_skills(skill_roots(user_config_folder() / "skills", repo, repository_trusted(config, repo)),
                         lambda _: None)  # what is left out is said when the run loads them
    if not skills:
        return options
    return {**options, "read_only": {str(skill.folder): f"{SANDBOX_SKILLS}/{skill.name}" for skill in skills}}
