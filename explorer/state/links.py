"""Links that open a page in a given state: the URL names every page reads (see the README's URL table).

A link is a relative URL (``/why?model=resnet18&solver=rotor&budget=50%25&tensor=...``), so it works on
any server and can be shared; the values are percent-encoded, a tensor is named by its label
(:func:`remat_core.graph.node_labels`; an id works too) and a budget as a percent (``50%``) or bytes with
a unit (``1.5GiB``).
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from remat_core import GraphError

URL_PARAMS = ("model", "level", "solver", "budget", "link", "tensor")
"""The query parameters the explorer reads, in the order links write them."""


def page_link(url_path: str, **params: str | None) -> str:
    """``/url_path?name=value&...`` with the given parameters (None ones left out) in :data:`URL_PARAMS` order.

    Raises
    ------
    ValueError
        For a parameter the explorer does not read.
    """
    unknown = set(params) - set(URL_PARAMS)
    if unknown:
        raise ValueError(f"unknown URL parameter(s) {sorted(unknown)}; the explorer reads {', '.join(URL_PARAMS)}")
    pairs = [(name, params[name]) for name in URL_PARAMS if params.get(name) is not None]
    query = urlencode(pairs, quote_via=quote, safe="")
    path = url_path.strip("/")
    return f"/{path}" + (f"?{query}" if query else "")


def source_settings(source: str) -> tuple[str, dict[str, str]]:
    """A model's link name split into its family and its settings: ``resnet18:batch_size=4`` is ``("resnet18",
    {"batch_size": "4"})``; a GraphError for a part that is not ``name=value``."""
    family, _, text = source.partition(":")
    settings: dict[str, str] = {}
    for part in filter(None, text.split(",")):
        name, equals, value = part.partition("=")
        if not equals or not name.strip():
            raise GraphError(f"{source}: {part!r} is not a setting; write name=value, separated by commas")
        settings[name.strip()] = value.strip()
    return family, settings
