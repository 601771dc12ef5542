// Swagger UI's start-up, as a file: the page's Content-Security-Policy allows no inline script.
// "openapi.json" is relative, so it resolves under API Gateway's stage prefix as well.
window.addEventListener("DOMContentLoaded", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    persistAuthorization: false,
  });
});
