"""A stub agent graph for the peer benchmark: no model, one node that echoes the input.

It gives LangGraph's in-memory dev server the same work Sema Edge's admission does without a runner:
accept a run on a thread (session) and record it; the run itself finishes at once.
"""
import time
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict, total=False):
    objective: str
    hold_ms: int
    reply: str


def echo(state: State) -> State:
    # hold_ms keeps the thread busy, as a run a runner is still driving keeps a session busy.
    time.sleep(state.get("hold_ms", 0) / 1000)
    return {"reply": state.get("objective", "")}


builder = StateGraph(State)
builder.add_node("echo", echo)
builder.add_edge(START, "echo")
builder.add_edge("echo", END)
graph = builder.compile()
