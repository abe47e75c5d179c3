"""The ReAct agent: tools from config, the loop, and the agent service."""
