import { pageHtml } from './shell-html.ts';

/**
 * INDEX_HTML: the dashboard's only HTML page, for the list and for one lock (`?lock=NS/NAME`).
 * Nothing inline: its style and script are files (`/assets/app.css`, `/assets/app.js`), so the
 * Content-Security-Policy (headers.ts) allows only this origin's files. A string here rather than
 * a file beside it, so that the compiled package carries it (tsc copies only modules).
 */
export const INDEX_HTML = pageHtml({
  title: 'fencepost dashboard',
  stylesheet: '/assets/app.css',
  body: `    <header class="top">
      <p class="brand"><a href="/">fencepost</a> <span>dashboard · read-only</span></p>
      <p id="conn" class="conn" role="status" aria-live="polite">Connecting…</p>
    </header>
    <main id="main" tabindex="-1">
      <section id="list-view" aria-labelledby="list-title" hidden>
        <h1 id="list-title">Distributed locks</h1>
        <form id="filters" class="filters" aria-label="Filter locks" role="search">
          <div>
            <label for="f-namespace">Namespace</label>
            <select id="f-namespace" name="namespace"><option value="">All namespaces</option></select>
          </div>
          <div>
            <label for="f-state">State</label>
            <select id="f-state" name="state">
              <option value="">Any state</option>
              <option value="Held">Held</option>
              <option value="Free">Free</option>
              <option value="Degraded">Degraded</option>
            </select>
          </div>
          <div>
            <label for="f-text">Lock or holder name</label>
            <input id="f-text" name="q" type="search" autocomplete="off" spellcheck="false">
          </div>
        </form>
        <p id="count" class="count" aria-live="polite"></p>
        <div class="table-wrap">
          <table id="locks" aria-busy="true">
            <caption class="visually-hidden">Every DistributedLock this kubeconfig can list; countdowns are estimates from the Lease's renewTime by this browser's clock</caption>
            <thead>
              <tr aria-rowindex="1">
                <th scope="col">Lock</th>
                <th scope="col">Namespace</th>
                <th scope="col">Mode</th>
                <th scope="col">Holder</th>
                <th scope="col">Token</th>
                <th scope="col">Expires in</th>
                <th scope="col">Permits / queue</th>
                <th scope="col">State</th>
                <th scope="col">Last transitions</th>
              </tr>
            </thead>
            <tbody id="lock-rows"></tbody>
          </table>
        </div>
      </section>
      <section id="lock-view" aria-labelledby="lock-title" hidden>
        <p><a href="/" id="back">← All locks</a></p>
        <h1 id="lock-title">Lock</h1>
        <div id="lock-body"></div>
      </section>
    </main>
`,
});
