import http from "node:http";

/** GET with any Host header and request target (fetch does not let a test choose them). */
export function rawRequest(base: string, target: string, headers: Record<string, string>, method = "GET", body?: string): Promise<{ status: number; type: string; text: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, method, path: target, headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) } }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => (text += chunk));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"] ?? ""), text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}
