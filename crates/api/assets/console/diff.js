// A line diff (longest common subsequence), for comparing two agent versions.

/** Lines of `a` and `b` as `[op, line]` with op " " (same), "-" (only in a), "+" (only in b). */
export function lineDiff(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const n = x.length, m = y.length;
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--)
    L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

/** The parts of an agent version worth comparing, as text. */
export function agentText(a) {
  return [
    `model: ${typeof a.model === "string" ? a.model : JSON.stringify(a.model)}`,
    `name: ${a.name}`,
    "system:",
    a.system || "",
    "tools:",
    JSON.stringify(a.tools || [], null, 2),
    "mcp_servers:",
    JSON.stringify(a.mcp_servers || [], null, 2),
  ].join("\n");
}
