"""The five read-only agent tools: one contract (schemas, validation, envelopes) and what each tool does."""
