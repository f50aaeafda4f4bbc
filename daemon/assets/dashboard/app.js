// Koru's web dashboard (placeholder until the real script lands): fetches /api/v1/sessions and lists each session's product and workspace folders, again on every live event.
const list = document.getElementById("sessions");

async function refresh() {
  const response = await fetch("/api/v1/sessions", { credentials: "same-origin" });
  if (!response.ok) {
    list.replaceChildren(item(`cannot list sessions: HTTP ${response.status}`));
    return;
  }
  const { sessions } = await response.json();
  if (sessions.length === 0) {
    list.replaceChildren(item("no IDE plugin is connected"));
    return;
  }
  list.replaceChildren(
    ...sessions.map((s) =>
      item(`${s.session_id} ${s.ide ? s.ide.product : ""} ${(s.window.workspace_folders || []).join(", ")}`),
    ),
  );
}

function item(text) {
  const li = document.createElement("li");
  li.textContent = text;
  return li;
}

refresh();
const events = new EventSource("/api/v1/events");
events.onmessage = refresh;
for (const kind of ["session_connected", "session_updated", "session_disconnected", "reset"]) {
  events.addEventListener(kind, refresh);
}
