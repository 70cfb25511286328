"""A Location's tools inside agent frameworks: pydantic-ai, LangChain, the OpenAI Agents SDK.

Each framework has one module, imported on its own (``pegboard.adapters.pydantic_ai``,
``pegboard.adapters.langchain``, ``pegboard.adapters.openai_agents``); importing this
package loads none of them.
"""

__all__ = ()
