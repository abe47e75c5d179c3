"""Tool selection: which of the offered tools each agent step shows the model, and why
(docs/tool-calling.md, *Selection*).

::

    from toolmesh.agent.selection import DialogView, ToolSelector
    offer = await ToolSelector(options).select(tools, catalogue=toolset.catalogue,
                                               dialog=DialogView(question=question))
    offer.tools      # the tools to show, by name
    offer.reasons    # why each is shown

Strategies consume the offer; they never rank tools themselves.
"""

from toolmesh.agent.selection.catalogue import Catalogue
from toolmesh.agent.selection.embeddings import Embedder
from toolmesh.agent.selection.find_tools import FIND_TOOLS, FindTools
from toolmesh.agent.selection.selector import (
    DEFAULT_BUDGET,
    DEFAULT_RELEVANCE,
    METHODS,
    DialogView,
    Method,
    Offer,
    SelectionOptions,
    ToolSelector,
)

__all__ = ["DEFAULT_BUDGET", "DEFAULT_RELEVANCE", "FIND_TOOLS", "METHODS", "Catalogue",
           "DialogView", "Embedder", "FindTools", "Method", "Offer", "SelectionOptions",
           "ToolSelector"]
