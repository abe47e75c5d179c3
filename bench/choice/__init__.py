"""The tool-choice benchmark's tools and questions (bench/tool_choice.py).

Two sets, each a few tools a small tool service announces (plus the built-in ``tell-joke``)
and questions worded as people ask, each with the call it needs:

* ``tuning``: the set toolmesh's prompts, schemas and selection were designed against;
* ``bench``: the set the figures are reported on, written apart from the tuning set and never
  tuned on (other tools, other wordings);

and ``distractors``: about fifty more tools of everyday services, announced by a second tool
service, so that a question is asked among sixty tools instead of a handful.
"""
