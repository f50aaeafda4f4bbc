// Koru's web dashboard (placeholder until the real script lands): fetches /api/v1/sessions and lists each session's product and workspace folders, every 2 s.
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

// Polling, not EventSource: headless tools that wait for the network to be idle
// (`chromium --dump-dom --virtual-time-budget`) would wait forever on an open stream.
refresh();
setInterval(refresh, 2000);
