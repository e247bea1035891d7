/**
 * RACE_CSS: the race page's stylesheet (`/assets/race.css`). The dashboard's palette: text colours
 * keep at least 4.5:1 on their background (WCAG AA), focus is always visible. Two columns (the
 * race, the code panel) from 1100 px; one below, down to a 390 px phone without sideways scrolling
 * (only the code block scrolls inside itself).
 */
export const RACE_CSS = `
:root {
  --fg: #1a1a1a; --muted: #4d4d4d; --bg: #ffffff; --panel: #f3f4f6; --line: #d0d4da;
  --good: #0a6b2e; --bad: #a1160a; --freeze: #1a4f8a; --focus: #1a56db;
  --a: #1f5fa8; --b: #7a2e8e;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); line-height: 1.45;
}
* { box-sizing: border-box; }
body { margin: 0; }
code, pre { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: .9em; }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.skip { position: absolute; left: -10000px; top: 0; padding: .5rem 1rem; background: var(--bg); }
.skip:focus { left: .5rem; top: .5rem; z-index: 10; }
.visually-hidden {
  position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap;
}
.top {
  display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: .25rem 1rem;
  padding: .5rem 1rem; background: var(--panel); border-bottom: 1px solid var(--line);
}
.top p { margin: 0; }
.brand span { color: var(--muted); }
.conn.ok { color: var(--good); }
.conn.down { color: var(--bad); font-weight: 600; }
.layout { display: grid; grid-template-columns: minmax(0, 1fr); gap: 0 1.5rem; padding: 0 1rem 2rem; max-width: 1500px; }
@media (min-width: 1100px) { .layout { grid-template-columns: minmax(0, 1fr) 30rem; } }
h1 { font-size: 1.3rem; margin: .75rem 0 .25rem; }
h2 { font-size: 1.1rem; margin: 1rem 0 .5rem; }
h3 { font-size: 1rem; margin: 0 0 .25rem; }
.lede { margin: .25rem 0 .75rem; max-width: 60rem; }
.help { color: var(--muted); font-size: .9rem; margin: .25rem 0 .5rem; }
.group { display: inline-flex; align-items: center; gap: .4rem; }
.row { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem .75rem; margin: .5rem 0; }
.controls { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: .25rem 1rem; margin-bottom: .75rem; }
.controls .help { margin: 0; }
button {
  font: inherit; min-height: 2.5rem; padding: .35rem .9rem; border-radius: 6px; cursor: pointer;
  border: 1px solid #5c5c5c; background: var(--bg); color: var(--fg);
}
button.primary { background: var(--a); border-color: var(--a); color: #ffffff; font-weight: 600; }
button:disabled { cursor: not-allowed; color: #5c5c5c; background: #e4e6ea; border-color: #9a9a9a; }
input[type=number] {
  font: inherit; width: 5.5rem; min-height: 2.5rem; padding: .3rem .4rem; border: 1px solid #767676; border-radius: 4px;
}
.switch { display: inline-flex; align-items: center; gap: .4rem; font-weight: 600; }
.switch input { width: 1.4rem; height: 1.4rem; accent-color: var(--good); margin: 0; }
.status { min-height: 1.5em; margin: .25rem 0; font-weight: 600; }
.status.error { color: var(--bad); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(10.5rem, 1fr)); gap: .75rem; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: .6rem .8rem; overflow-wrap: anywhere; }
.card p { margin: .2rem 0; }
.pod[data-status=holding] { border-color: var(--good); box-shadow: inset 4px 0 0 var(--good); }
.pod[data-status=frozen] { border-color: var(--freeze); box-shadow: inset 4px 0 0 var(--freeze); background: #eef4fb; }
.pod[data-status=frozen] .pod-status { color: var(--freeze); font-weight: 700; }
.pod[data-stale=refused] .pod-stale { color: var(--good); font-weight: 600; }
.pod[data-stale=overwrote] .pod-stale { color: var(--bad); font-weight: 600; }
.swatch { display: inline-block; width: .8rem; height: .8rem; border-radius: 2px; margin-right: .4rem; }
.swatch.a { background: var(--a); }
.swatch.b { background: var(--b); }
progress { width: 100%; height: .8rem; accent-color: var(--good); }
.ledger { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace; }
.outcome.good { color: var(--good); font-weight: 600; }
.outcome.bad { color: var(--bad); font-weight: 600; }
.lanes-wrap { width: 100%; }
.lanes { display: block; width: 100%; height: 7.5rem; }
.lanes .axis { stroke: var(--line); }
.lanes text { font-size: 12px; fill: var(--fg); }
.lanes .tick { font-size: 11px; fill: var(--muted); }
.lanes .held.a { fill: var(--a); }
.lanes .held.b { fill: var(--b); }
.lanes .frozen { fill: #cfe0f5; stroke: var(--freeze); stroke-dasharray: 3 2; }
.lanes .expired { stroke: var(--freeze); stroke-width: 2; }
.lanes .refused { fill: var(--good); }
.lanes .overwrote { fill: var(--bad); }
.lanes .grant { fill: var(--fg); }
.timeline { list-style: none; padding: 0; margin: .5rem 0 0; border-left: 3px solid var(--line); }
.timeline li { padding: .3rem .75rem; border-bottom: 1px solid var(--panel); }
.timeline time { font-variant-numeric: tabular-nums; color: var(--muted); margin-right: .4rem; }
.timeline .grant { border-left: 3px solid var(--fg); margin-left: -3px; }
.timeline .freeze { border-left: 3px solid var(--freeze); margin-left: -3px; color: var(--freeze); }
.timeline .good { border-left: 3px solid var(--good); margin-left: -3px; color: var(--good); font-weight: 600; }
.timeline .bad { border-left: 3px solid var(--bad); margin-left: -3px; color: var(--bad); font-weight: 600; }
.code { min-width: 0; }
.tabs { display: flex; flex-wrap: wrap; gap: .25rem; border-bottom: 1px solid var(--line); }
.tabs [role=tab] { border-radius: 6px 6px 0 0; border-bottom: 0; min-height: 2.5rem; }
.tabs [role=tab][aria-selected=true] { background: var(--fg); border-color: var(--fg); color: #ffffff; font-weight: 600; }
.code-panel { border: 1px solid var(--line); border-top: 0; background: #f7f7f9; }
.code-panel pre { margin: 0; padding: .75rem; overflow-x: auto; font-size: .78rem; line-height: 1.4; tab-size: 4; }
@media (min-width: 1100px) { .code { position: sticky; top: 0; align-self: start; max-height: 100vh; overflow-y: auto; } }
@media (max-width: 760px) {
  .layout { padding: 0 .5rem 1.5rem; }
  h1 { font-size: 1.2rem; }
}
`;
