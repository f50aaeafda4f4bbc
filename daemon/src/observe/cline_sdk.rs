//! Cline 4 SDK sessions (`~/.cline/data/sessions/<id>/<id>.json` manifest and `<id>.messages.json`): a pure reader from the two files' bytes to a `ChatSnapshot`.
