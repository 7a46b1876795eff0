// Flow names by id, for pages that list runs or gates of any flow (people know flows by name).
import { useEffect, useState } from "react";
import { api, type Flow } from "./api";

export function useFlowNames(): Record<string, string> {
  const [names, setNames] = useState<Record<string, string>>({});
  useEffect(() => {
    api<Flow[]>("/flows").then((flows) => setNames(Object.fromEntries(flows.map((f) => [f.id, f.name])))).catch(() => {});
  }, []);
  return names;
}
