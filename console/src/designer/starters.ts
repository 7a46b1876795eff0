// Graphs a new flow can start from, kept as data (starters.json) that the tests run as they are.
// Workers come without a webhook URL: the designer shows the server's complaint on each until
// one is filled in. A node receives the outputs of the nodes with an edge to it (merged, a later
// edge winning a clash): the Approval starter's publishing Worker has an edge from the drafting
// Worker as well as from the gate, so it gets the draft and the answer.
import type { Graph } from "../api";
import starters from "./starters.json";

export interface Starter { id: string; title: string; description: string; graph: Graph }

export const STARTERS: Starter[] = starters as Starter[];
