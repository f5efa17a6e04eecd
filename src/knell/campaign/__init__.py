"""Campaigns: one plan of many seeded runs, run in shards anywhere, merged.

A release gate is hundreds of seeded runs across scenarios, stores and
buses, more than one machine does in a sitting. A campaign file names the
axes once; every machine expands it to the same numbered runs
(:mod:`.plan`), takes its share of them (:mod:`.shard`), runs them and
writes a self-describing folder (:mod:`.run`); any number of such folders
merge into one verdict (:mod:`.merge`) and one page (:mod:`.dashboard`).
The plan hash ties the pieces together: a folder from another plan is
refused rather than mixed in.
"""

from __future__ import annotations

from knell.campaign.plan import Campaign, CampaignError, PlannedRun, load_campaign

__all__ = ["Campaign", "CampaignError", "PlannedRun", "load_campaign"]
