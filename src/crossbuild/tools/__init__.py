"""The tools models use — the same functions for our agent loop and for outside agents over MCP."""

from crossbuild.tools.base import ToolResult, Toolset
from crossbuild.tools.build import BUILD_STATUS, VERIFY
from crossbuild.tools.build_dependency import BUILD_DEPENDENCY
from crossbuild.tools.build_tool import PROVIDE_BUILD_TOOL
from crossbuild.tools.command import RUN_COMMAND
from crossbuild.tools.files import FILE_TOOLS
from crossbuild.tools.knowledge import SEARCH_KNOWLEDGE


def default_toolset() -> Toolset:
    """Every tool a cross build needs: files, commands, knowledge, status and verification."""
    return Toolset([*FILE_TOOLS, RUN_COMMAND, SEARCH_KNOWLEDGE, BUILD_DEPENDENCY, PROVIDE_BUILD_TOOL, BUILD_STATUS,
                    VERIFY])


__all__ = ["ToolResult", "Toolset", "default_toolset"]
