"""The window's panels: model library, inspector, sweep editor, scenario, messages."""
