"""Model-backed features (the optional `markindex[llm]` extra): provider access, rate limits,
`retrieve`, and the tool definitions for agents. Imported only where a model is asked for; the
base `import markindex_core` never loads pydantic-ai."""
