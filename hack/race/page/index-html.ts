import { pageHtml } from '../../../src/dashboard/page/shell-html.ts';

/**
 * RACE_HTML: the race page. Nothing inline (its stylesheet and module are files), so the
 * dashboard's Content-Security-Policy applies unchanged. The timeline's drawing is decorative
 * (aria-hidden): the list under it says the same in words, and the important lines are also
 * announced through a polite live region.
 */
export const RACE_HTML = pageHtml({
  title: 'fencepost: the race',
  stylesheet: '/assets/race.css',
  body: `    <header class="top">
      <p class="brand"><strong>fencepost</strong> <span>the race · real processes on this machine</span></p>
      <p id="conn" class="conn" role="status">Connecting…</p>
    </header>
    <div class="layout">
      <main id="main" tabindex="-1">
        <h1>A lock holder freezes. Does its late write get through?</h1>
        <p class="lede">Two pods each run a fencepost agent and a worker that writes to the Redis key
          <code id="key">ledger</code> while its agent says it holds the lock <code id="lock">billing</code>.
          Freeze the holder (a real <code>SIGSTOP</code>) past its <span id="lease-seconds">2</span> s lease and
          watch its write when it wakes up.</p>
        <section class="controls" aria-labelledby="controls-title">
          <h2 id="controls-title" class="visually-hidden">Controls</h2>
          <div class="row">
            <button id="race" type="button" class="primary">Race worker A and worker B</button>
            <span class="group">
              <label for="pause">Freeze the holder for</label>
              <input id="pause" type="number" min="1" max="120" step="1" value="15" inputmode="numeric" aria-describedby="pause-help">
              <span id="pause-help">s <span class="visually-hidden">(seconds, 1 to 120)</span></span>
            </span>
            <button id="freeze" type="button" disabled>Freeze the holder</button>
            <button id="thaw" type="button" hidden>Wake it now</button>
          </div>
          <div class="row">
            <span class="switch">
              <input id="guard" type="checkbox" role="switch" checked aria-describedby="guard-help">
              <label for="guard">Fencing guard</label>
            </span>
            <span id="guard-help" class="help">on: the Redis guard refuses a token below the highest it has accepted;
              off: a plain <code>SET</code></span>
          </div>
          <p id="status" class="status" role="status"></p>
        </section>
        <section class="board" aria-labelledby="board-title">
          <h2 id="board-title" class="visually-hidden">Now</h2>
          <div class="cards">
            <article class="card pod" id="pod-worker-a" data-pod="worker-a" aria-labelledby="pod-worker-a-name">
              <h3 id="pod-worker-a-name"><span class="swatch a" aria-hidden="true"></span>worker-a</h3>
              <p id="pod-worker-a-status" class="pod-status">Not started.</p>
              <p id="pod-worker-a-stale" class="pod-stale"></p>
            </article>
            <article class="card pod" id="pod-worker-b" data-pod="worker-b" aria-labelledby="pod-worker-b-name">
              <h3 id="pod-worker-b-name"><span class="swatch b" aria-hidden="true"></span>worker-b</h3>
              <p id="pod-worker-b-status" class="pod-status">Not started.</p>
              <p id="pod-worker-b-stale" class="pod-stale"></p>
            </article>
            <article class="card" aria-labelledby="lease-title">
              <h3 id="lease-title">Lease</h3>
              <p id="lease-text">No lease yet.</p>
              <progress id="lease-bar" max="1000" value="0" aria-labelledby="lease-title"></progress>
            </article>
            <article class="card" aria-labelledby="ledger-title">
              <h3 id="ledger-title">Redis <code>ledger</code></h3>
              <p id="ledger" class="ledger">(empty)</p>
              <p id="outcome" class="outcome"></p>
            </article>
          </div>
        </section>
        <section aria-labelledby="timeline-title">
          <h2 id="timeline-title">Timeline</h2>
          <div id="lanes-wrap" class="lanes-wrap" aria-hidden="true"><svg id="lanes" class="lanes" role="presentation"></svg></div>
          <ol id="timeline" class="timeline"></ol>
          <p id="announce" class="visually-hidden" aria-live="polite"></p>
        </section>
      </main>
      <aside class="code" aria-labelledby="code-title">
        <h2 id="code-title">The same lock in your language</h2>
        <div id="langs" class="tabs" role="tablist" aria-label="Language"></div>
        <div id="code-panel" class="code-panel" role="tabpanel" tabindex="0">
          <pre><code id="code"></code></pre>
        </div>
        <p id="code-note" class="help"></p>
        <p class="row"><button id="copy" type="button">Copy code</button> <span id="copied" role="status"></span></p>
      </aside>
    </div>
`,
});
