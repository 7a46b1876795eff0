// The Stitch console: flows, runs and one run live. Every view has its own address.
import "@xyflow/react/dist/style.css";
import "./styles.css";
import { StrictMode, useEffect, useState, type FormEvent } from "react";
import { createRoot } from "react-dom/client";
import { api, apiKey, whenUnauthorised } from "./api";
import { FlowPage } from "./FlowPage";
import { FlowsPage } from "./FlowsPage";
import { DesignerPage } from "./designer/DesignerPage";
import { WaitingPage } from "./WaitingPage";
import { onLink, useLocation } from "./router";
import { RunPage } from "./RunPage";
import { RunTable } from "./RunTable";
import { useFlowNames } from "./useFlowNames";

function Login({ onDone }: { onDone: () => void }) {
  const [key, setKey] = useState("");
  const [problem, setProblem] = useState("");
  async function submit(event: FormEvent) {
    event.preventDefault();
    try {
      await api("/flows", { key: key.trim() });
      apiKey.set(key.trim());
      onDone();
    } catch (e) {
      setProblem((e as { status?: number }).status === 401 ? "That is not this server's API key." : (e as Error).message);
    }
  }
  return (
    <form className="login" data-testid="login-form" onSubmit={(e) => void submit(e)}>
      <h2>This Stitch server needs its API key</h2>
      <p>The key (STITCH_API_KEY) is kept in this browser tab only, until you log out or close it.</p>
      <input data-testid="api-key" type="password" autoComplete="current-password" value={key} autoFocus
             onChange={(e) => setKey(e.target.value)} placeholder="API key" />
      <button data-testid="login-submit" type="submit" disabled={!key.trim()}>Log in</button>
      {problem && <p className="error" data-testid="login-error">{problem}</p>}
    </form>
  );
}

function RunsPage() {
  const names = useFlowNames();
  return <div className="page"><RunTable flowNames={names} /></div>;
}

function App() {
  const { path, query } = useLocation();
  const [locked, setLocked] = useState(false);
  const [session, setSession] = useState(0);
  useEffect(() => whenUnauthorised(() => { apiKey.clear(); setLocked(true); }), []);
  const [, section, id, sub] = path.split("/");
  const version = query.get("version") && Number.isInteger(Number(query.get("version"))) ? Number(query.get("version")) : null;
  let view = <FlowsPage />;
  if (section === "flows" && id === "new") view = <DesignerPage flowId={null} starter={query.get("starter")} version={null} />;
  else if (section === "flows" && id && sub === "edit") view = <DesignerPage flowId={id} starter={null} version={version} />;
  else if (section === "flows" && id) view = <FlowPage id={id} />;
  else if (section === "runs" && id === "waiting") view = <WaitingPage />;
  else if (section === "runs" && id) view = <RunPage id={id} />;
  else if (section === "runs") view = <RunsPage />;
  return (
    <>
      <header>
        <a className="brand" href="/" onClick={onLink}>Stitch</a>
        <nav>
          <a href="/" onClick={onLink} className={section === "" || section === "flows" ? "active" : ""}>Flows</a>
          <a href="/runs" onClick={onLink} className={section === "runs" && id !== "waiting" ? "active" : ""}>Runs</a>
          <a href="/runs/waiting" onClick={onLink} data-testid="nav-waiting" className={section === "runs" && id === "waiting" ? "active" : ""}>Waiting</a>
          <a href="/docs">API</a>
        </nav>
        {apiKey.get() && !locked && <button data-testid="logout" onClick={() => { apiKey.clear(); setLocked(true); }}>Log out</button>}
      </header>
      <main key={`${path}#${session}`}>
        {locked ? <Login onDone={() => { setLocked(false); setSession((n) => n + 1); }} /> : view}
      </main>
    </>
  );
}

createRoot(document.getElementById("root")!).render(<StrictMode><App /></StrictMode>);
