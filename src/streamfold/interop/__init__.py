"""Adapters to the types users already hold, each an optional extra.

`streamfold.interop.openai` (ChatCompletion, Response), `.anthropic` (Message),
`.pydantic_ai` (ModelResponse), `.langchain` (AIMessage): `to_*` builds the library's own
object from a Message, `from_*` reads one back. Nothing in the core imports them; importing
one without its library raises an ImportError naming the extra to install.
"""
