/**
 * pageHtml: the HTML shell of the pages fencepost serves (the dashboard's, and the race page of
 * `npm run demo -- --web`, hack/race/): the head with the icon, one stylesheet and the module
 * `/assets/app.js`, and a body that starts with the skip link to `#main`. Nothing inline, so that
 * the Content-Security-Policy (headers.ts) allows only this origin's files on both pages.
 *
 * `title` and `stylesheet` are inserted as they are (they are constants, not user input); `body`
 * is the markup after the skip link, each line indented by four spaces and ending in a newline.
 */
export function pageHtml(o: { readonly title: string; readonly stylesheet: string; readonly body: string }): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="color-scheme" content="light">
    <title>${o.title}</title>
    <link rel="icon" href="/assets/icon.svg" type="image/svg+xml">
    <link rel="stylesheet" href="${o.stylesheet}">
    <script type="module" src="/assets/app.js"></script>
  </head>
  <body>
    <a class="skip" href="#main">Skip to content</a>
${o.body}  </body>
</html>
`;
}
