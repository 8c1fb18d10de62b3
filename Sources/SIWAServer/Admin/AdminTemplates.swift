import Crypto
import Foundation
import Mustache

/// The admin page's templates (swift-mustache: `{{value}}` is HTML-escaped
/// by the engine; this file never writes `{{{` or `{{&`, so no value is
/// inserted unescaped), and its one stylesheet, inline under a hash in the
/// Content-Security-Policy: nothing is loaded from anywhere.
enum AdminTemplates {
    static let style = """
        :root{color-scheme:light;--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bad:#b91c1c;--ok:#047857}
        *{box-sizing:border-box}
        body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--ink);background:#f9fafb}
        header,main{max-width:1180px;margin:0 auto;padding:12px 16px}
        header{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:baseline;justify-content:space-between}
        h1{font-size:20px;margin:0}h2{font-size:16px;margin:0 0 8px}
        .who,.muted{color:var(--muted);font-size:13px}
        .card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:12px;margin:0 0 16px;min-width:0}
        .charts{display:grid;gap:16px;grid-template-columns:repeat(auto-fit,minmax(340px,1fr));margin-bottom:16px}
        .charts .card{margin:0}
        svg{width:100%;height:auto;display:block}
        .legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;margin:6px 0 0;padding:0;list-style:none}
        .swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px;vertical-align:-1px}
        .scroll{overflow-x:auto}
        table{border-collapse:collapse;width:100%;font-size:13px}
        th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}
        th{font-weight:600;color:var(--muted);white-space:nowrap}
        td.sub,td.details{overflow-wrap:anywhere}
        #history{margin-top:14px}
        @media (max-width:640px){
          table.stack thead{display:none}
          table.stack,table.stack tbody,table.stack tr,table.stack td{display:block;width:100%}
          table.stack tr{border-bottom:1px solid var(--line);padding:6px 0}
          table.stack td{border:0;padding:2px 0}
          table.stack td[data-label]::before{content:attr(data-label);display:inline-block;min-width:6.5em;color:var(--muted);font-weight:600}
        }
        form.inline{display:inline}
        button{font:inherit;font-size:13px;padding:4px 10px;border-radius:6px;border:1px solid #9ca3af;background:#fff;cursor:pointer}
        button.retry{border-color:#2563eb;color:#1d4ed8}button.cancel{border-color:#b91c1c;color:#b91c1c}button.run-now{border-color:#047857;color:#047857}
        .search{display:flex;gap:8px}.search+.search{margin-top:8px}.search input{flex:1;min-width:0;font:inherit;padding:6px 8px;border:1px solid #9ca3af;border-radius:6px}
        .chain{font-weight:600}.chain.ok{color:var(--ok)}.chain.broken{color:var(--bad)}.chain.unknown{color:var(--muted)}
        .notice{background:#ecfdf5;border-color:#a7f3d0}.notice.error{background:#fef2f2;border-color:#fecaca}
        code{font-size:12px;word-break:break-all}
        nav.days a{margin-right:8px}nav.days a.on{font-weight:700;color:var(--ink);text-decoration:none}
        .swatch.c0{background:#2563eb}.swatch.c1{background:#f59e0b}.swatch.c2{background:#10b981}.swatch.c3{background:#db2777}
        .swatch.c4{background:#8b5cf6}.swatch.c5{background:#0891b2}.swatch.c6{background:#65a30d}.swatch.c7{background:#6b7280}
        .swatch.sla{background:#dc2626}
        """

    /// `'sha256-…'` of `style`, for the Content-Security-Policy.
    static let styleHash = "'sha256-" + Data(SHA256.hash(data: Data(style.utf8))).base64EncodedString() + "'"

    static let contentSecurityPolicy = "default-src 'none'; style-src \(styleHash); img-src data:; form-action 'self'; "
        + "frame-ancestors 'none'; base-uri 'none'"

    /// A chart: grid, bars, lines, labels, then its legend below.
    static let chart = """
        <svg viewBox="0 0 {{width}} {{height}}" role="img" aria-label="{{title}}" class="chart">
        {{#rules}}<line x1="{{plotStart}}" x2="{{plotEnd}}" y1="{{y}}" y2="{{y}}" stroke="#e5e7eb" stroke-width="1"/>{{/rules}}
        {{#bars}}<rect x="{{x}}" y="{{y}}" width="{{width}}" height="{{height}}" fill="{{color}}"><title>{{title}}</title></rect>{{/bars}}
        {{#lines}}<path d="{{d}}" fill="none" stroke="{{color}}" stroke-width="2.5" stroke-linecap="round" stroke-linejoin="round"\
        {{#dashed}} stroke-dasharray="6 4"{{/dashed}}><title>{{title}}</title></path>{{/lines}}
        {{#points}}<circle cx="{{x}}" cy="{{y}}" r="4" fill="{{color}}"><title>{{title}}</title></circle>{{/points}}
        {{#labels}}<text x="{{x}}" y="{{y}}" text-anchor="{{anchor}}" font-size="14" fill="#6b7280" dominant-baseline="middle">{{text}}</text>{{/labels}}
        {{^hasData}}<text x="{{middleX}}" y="{{middleY}}" text-anchor="middle" font-size="18" fill="#6b7280">no data in these days</text>{{/hasData}}
        </svg>
        <ul class="legend">{{#legend}}<li><span class="swatch {{swatch}}"></span>{{name}}</li>{{/legend}}</ul>
        """

    static let page = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="same-origin">
        <title>siwa admin</title>
        <style>\(style)</style>
        </head>
        <body>
        <header>
          <h1>siwa admin</h1>
          <span class="who">key <strong>{{keyName}}</strong> · {{generatedAt}}</span>
        </header>
        <main>
        {{#notice}}<section class="card notice{{#isError}} error{{/isError}}" id="notice">{{text}}</section>{{/notice}}
        <section class="card" id="chain">
          <h2>Audit chain</h2>
          {{#chain}}<p class="chain {{state}}" id="chain-state">{{summary}}</p>
          {{#head}}<p class="muted">head: seq <strong>{{seq}}</strong> <code>{{hash}}</code></p>{{/head}}{{/chain}}
        </section>
        <section class="card" id="search">
          <h2>A user's history</h2>
          <form class="search" method="get" action="/admin">
            <input name="sub" placeholder="Apple sub, e.g. 001234.0123abcd.0001" value="{{search}}" aria-label="Apple sub">
            <input type="hidden" name="days" value="{{days}}">
            <button type="submit">Show</button>
          </form>
          <form class="search" method="post" action="/admin/users/find" id="find-email">
            <input type="hidden" name="csrf" value="{{csrf}}">
            <input type="hidden" name="days" value="{{days}}">
            <input name="email" type="email" placeholder="or an active user's whole email address" aria-label="Email address" autocomplete="off">
            <button type="submit">Find</button>
          </form>
          {{#history}}
          <div id="history" class="scroll">
            <h2>History of <code>{{sub}}</code></h2>
            {{^hasRows}}<p class="muted">nothing recorded for this sub</p>{{/hasRows}}
            {{#hasRows}}<table class="stack"><thead><tr><th>at</th><th>team</th><th>source</th><th>action</th><th>details</th></tr></thead><tbody>
            {{#rows}}<tr><td data-label="at">{{at}}</td><td data-label="team">{{team}}</td><td data-label="source">{{source}}</td><td data-label="action">{{action}}</td>\
        <td class="details" data-label="details"><code>{{details}}</code></td></tr>{{/rows}}
            </tbody></table>{{/hasRows}}
          </div>
          {{/history}}
        </section>
        <nav class="days card">last
        {{#dayChoices}}<a href="{{href}}"{{#selected}} class="on"{{/selected}}>{{days}} days</a>{{/dayChoices}}
        </nav>
        <div class="charts">
          <section class="card" id="notifications-chart"><h2>Notifications per day, by type</h2>{{#notifications}}{{> chart}}{{/notifications}}</section>
          <section class="card" id="latency-chart"><h2>Purge latency per day (p50, p95) against the SLA</h2>{{#latency}}{{> chart}}{{/latency}}</section>
          <section class="card" id="refusals-chart"><h2>Refusals per day, by reason</h2>{{#refusals}}{{> chart}}{{/refusals}}</section>
        </div>
        <section class="card" id="attention">
          <h2>Needs attention ({{attentionCount}})</h2>
          <p class="muted">Discarded jobs, and purges not completed within the SLA ({{slaHours}} h).</p>
          {{^hasAttention}}<p>Nothing: every purge is on time.</p>{{/hasAttention}}
          {{#hasAttention}}<div class="scroll"><table class="stack"><thead><tr><th>job</th><th>Apple sub</th><th>team</th><th>state</th><th>attempt</th>\
        <th>since</th><th>last error</th><th></th></tr></thead><tbody>
          {{#attention}}<tr data-job="{{jobID}}"><td data-label="job">{{jobID}}</td>\
        <td class="sub" data-label="Apple sub"><a href="{{historyHref}}">{{sub}}</a></td><td data-label="team">{{team}}</td><td data-label="state">{{state}}</td>\
        <td data-label="attempt">{{attempt}}</td><td data-label="since">{{since}}</td><td class="details" data-label="last error">{{lastError}}</td><td>
            {{#canRetry}}<form class="inline" method="post" action="/admin/jobs/{{jobID}}/retry"><input type="hidden" name="csrf" value="{{csrf}}">\
        <button type="submit" class="retry" name="job" value="{{jobID}}">Retry</button></form>{{/canRetry}}
            {{#canCancel}}<form class="inline" method="post" action="/admin/jobs/{{jobID}}/cancel"><input type="hidden" name="csrf" value="{{csrf}}">\
        <button type="submit" class="cancel" name="job" value="{{jobID}}">Cancel</button></form>{{/canCancel}}
            {{#canRunNow}}<form class="inline" method="post" action="/admin/jobs/{{jobID}}/run-now"><input type="hidden" name="csrf" value="{{csrf}}">\
        <button type="submit" class="run-now" name="job" value="{{jobID}}">Run now</button></form>{{/canRunNow}}
          </td></tr>{{/attention}}
          </tbody></table></div>{{/hasAttention}}
        </section>
        {{#hasWaiting}}<section class="card" id="waiting">
          <h2>Purges waiting out the grace delay</h2>
          <p class="muted">Users who revoked consent: their Apple tokens are revoked, their data is purged when due unless they sign in again first.</p>
          <div class="scroll"><table class="stack"><thead><tr><th>job</th><th>Apple sub</th><th>team</th><th>due</th><th>requested</th><th></th></tr></thead><tbody>
          {{#waiting}}<tr data-job="{{jobID}}"><td data-label="job">{{jobID}}</td>\
        <td class="sub" data-label="Apple sub"><a href="{{historyHref}}">{{sub}}</a></td><td data-label="team">{{team}}</td><td data-label="due">{{due}}</td>\
        <td data-label="requested">{{requested}}</td><td>
            <form class="inline" method="post" action="/admin/jobs/{{jobID}}/run-now"><input type="hidden" name="csrf" value="{{csrf}}">\
        <button type="submit" class="run-now" name="job" value="{{jobID}}">Run now</button></form>
          </td></tr>{{/waiting}}
          </tbody></table></div>
        </section>{{/hasWaiting}}
        <p class="muted">JSON: /admin/audit, /admin/users/{sub}/history, POST /admin/users/find, /admin/summary, /admin/jobs, /admin/audit/verify, /admin/receipts/{sub}</p>
        </main>
        </body>
        </html>
        """

    static let library: MustacheLibrary = {
        var library = MustacheLibrary()
        // Constants of this file: a parse error is a bug that every page test shows.
        try? library.register(chart, named: "chart")
        try? library.register(page, named: "page")
        return library
    }()
}
