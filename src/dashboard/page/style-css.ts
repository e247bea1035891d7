/**
 * STYLE_CSS: the page's stylesheet, served as `/assets/app.css` (a string here so the compiled
 * package carries it). Colours keep a contrast ratio of at least 4.5:1 on their background
 * (WCAG AA); focus is always visible; under 760 px each table row becomes a card, so a phone shows
 * every field without scrolling sideways.
 */
export const STYLE_CSS = `
:root {
  --fg: #1a1a1a; --muted: #4d4d4d; --bg: #ffffff; --panel: #f3f4f6; --line: #d0d4da;
  --link: #0645ad; --held: #0a6b2e; --free: #4d4d4d; --warn: #8a3b00; --focus: #1a56db;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: var(--fg); background: var(--bg); line-height: 1.4;
}
* { box-sizing: border-box; }
body { margin: 0; }
a { color: var(--link); }
a:focus-visible, select:focus-visible, input:focus-visible, main:focus-visible {
  outline: 3px solid var(--focus); outline-offset: 2px;
}
.skip { position: absolute; left: -10000px; top: 0; padding: .5rem 1rem; background: var(--bg); }
.skip:focus { left: .5rem; top: .5rem; z-index: 10; }
.visually-hidden {
  position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap;
}
.top {
  display: flex; flex-wrap: wrap; justify-content: space-between; align-items: center; gap: .5rem;
  padding: .5rem 1rem; background: var(--panel); border-bottom: 1px solid var(--line);
}
.top p { margin: 0; }
.brand a { font-weight: 700; text-decoration: none; color: var(--fg); }
.brand span { color: var(--muted); }
.conn.ok { color: var(--held); }
.conn.down { color: var(--warn); font-weight: 600; }
main { padding: 0 1rem 2rem; max-width: 1400px; }
h1 { font-size: 1.4rem; margin: 1rem 0 .5rem; word-break: break-all; }
h3 { font-size: 1.05rem; margin: 1.25rem 0 .5rem; }
.filters { display: flex; flex-wrap: wrap; gap: .75rem 1.25rem; align-items: end; margin: .5rem 0; }
.filters label { display: block; font-size: .85rem; color: var(--muted); margin-bottom: .15rem; }
.filters select, .filters input {
  font: inherit; padding: .3rem .4rem; min-height: 2.25rem; border: 1px solid #767676; border-radius: 4px;
  background: var(--bg); color: var(--fg); min-width: 11rem;
}
.count { color: var(--muted); margin: .25rem 0 .5rem; }
.table-wrap { width: 100%; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .35rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
thead th { background: var(--panel); position: sticky; top: 0; }
.num { font-variant-numeric: tabular-nums; }
/* The list is windowed (page/list.ts): every row one line high, and column widths that do not
   follow whichever rows are rendered; long text is cut with an ellipsis (the lock's page has it whole). */
table#locks { table-layout: fixed; }
#locks thead th:nth-child(1) { width: 12%; } #locks thead th:nth-child(2) { width: 11%; }
#locks thead th:nth-child(3) { width: 8%; } #locks thead th:nth-child(4) { width: 10%; }
#locks thead th:nth-child(5) { width: 6%; } #locks thead th:nth-child(6) { width: 8%; }
#locks thead th:nth-child(7) { width: 8%; } #locks thead th:nth-child(8) { width: 19%; }
#locks thead th:nth-child(9) { width: 18%; }
#locks tbody th, #locks tbody td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#locks tr.spacer td { padding: 0; border: 0; }
td.recent { color: var(--muted); font-size: .85rem; }
.state.held { color: var(--held); font-weight: 600; }
.state.free { color: var(--free); }
.state.degraded { color: var(--warn); }
.fields { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; margin: .5rem 0; }
.fields dt { color: var(--muted); }
.fields dd { margin: 0; }
.links { display: flex; flex-wrap: wrap; gap: .5rem 1.5rem; padding: 0; list-style: none; }
.timeline { list-style: none; padding: 0; margin: 0; border-left: 3px solid var(--line); }
.timeline li { padding: .3rem .75rem; border-bottom: 1px solid var(--panel); }
.timeline li.warning { border-left: 3px solid var(--warn); margin-left: -3px; }
.timeline li.warning strong { color: var(--warn); }
.timeline li.renewal { color: var(--muted); }
.timeline time { font-variant-numeric: tabular-nums; color: var(--muted); margin-right: .25rem; }
.empty { color: var(--muted); }
@media (max-width: 760px) {
  main { padding: 0 .5rem 1.5rem; }
  .filters > div, .filters select, .filters input { width: 100%; }
  table#locks thead { position: absolute; left: -10000px; }
  table#locks, table#locks tbody, table#locks tr, table#locks th, table#locks td { display: block; width: 100%; }
  table#locks tr { border: 1px solid var(--line); border-radius: 6px; margin: .5rem 0; padding: .25rem 0; }
  table#locks tr.spacer { border: 0; margin: 0; padding: 0; }
  table#locks tr.spacer td::before { content: none; }
  table#locks th, table#locks td { border: 0; padding: .15rem .6rem; overflow-wrap: anywhere; }
  table#locks td::before { content: attr(data-label) ": "; color: var(--muted); }
  table#locks th[scope=row] { font-size: 1.05rem; }
  .fields { grid-template-columns: 1fr; }
  .fields dd { margin-bottom: .3rem; overflow-wrap: anywhere; }
}
`;
