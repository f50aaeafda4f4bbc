//! Cline, Roo Code and Kilo Code task histories (`tasks/<task>/ui_messages.json`, rewritten whole): a pure reader from bytes to `ChatSnapshot`.
