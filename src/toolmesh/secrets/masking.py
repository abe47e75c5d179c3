"""Config responses as the API shows them: every secret masked, whatever the operation."""

from __future__ import annotations

from typing import Any

from toolmesh.secrets.fields import mask_value


def mask_config_response(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` (of any config operation) with the secrets in its ``values`` and
    ``config`` shown as ``***``; the rest as it was."""
    values, config = response.get("values"), response.get("config")
    if not values and not config:
        return response
    out = dict(response)
    if isinstance(values, list):
        out["values"] = [_masked_entry(v) for v in values]
    if isinstance(config, dict):
        out["config"] = {t: ({k: mask_value(t, v) if isinstance(v, str) else v
                              for k, v in items.items()} if isinstance(items, dict) else items)
                         for t, items in config.items()}
    return out


def _masked_entry(entry: Any) -> Any:
    if not isinstance(entry, dict) or not isinstance(entry.get("value"), str):
        return entry
    type = entry.get("type")
    return {**entry, "value": mask_value(type if isinstance(type, str) else "", entry["value"])}
