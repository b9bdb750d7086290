"""Test helpers for pytest-reliable and its users: a scripted OpenAI-compatible server."""

from pytest_reliable.testing.scripted_server import Fault, ScriptedServer, scripted_model

__all__ = ["Fault", "ScriptedServer", "scripted_model"]
