// Swagger UI's start-up, as a file: the page's Content-Security-Policy allows no inline script.
// "openapi.json" is relative, so it resolves under API Gateway's stage prefix as well; "Try it
// out" calls get the same prefix (the page's path before /docs: "" locally, "/v1" in AWS).
window.addEventListener("DOMContentLoaded", function () {
  const base = location.pathname.replace(/\/docs\/?$/, "");
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    persistAuthorization: false,
    requestInterceptor: function (req) {
      const url = new URL(req.url, location.href);
      if (base && url.origin === location.origin && !url.pathname.startsWith(base + "/")) {
        url.pathname = base + url.pathname;
        req.url = url.toString();
      }
      return req;
    },
  });
});
