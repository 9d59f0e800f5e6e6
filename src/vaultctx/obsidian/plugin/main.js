/* vaultctx Obsidian plugin: built by esbuild from plugins/obsidian/src (npm run build) */
"use strict";
var __create = Object.create;
var __defProp = Object.defineProperty;
var __getOwnPropDesc = Object.getOwnPropertyDescriptor;
var __getOwnPropNames = Object.getOwnPropertyNames;
var __getProtoOf = Object.getPrototypeOf;
var __hasOwnProp = Object.prototype.hasOwnProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};
var __copyProps = (to, from, except, desc) => {
  if (from && typeof from === "object" || typeof from === "function") {
    for (let key of __getOwnPropNames(from))
      if (!__hasOwnProp.call(to, key) && key !== except)
        __defProp(to, key, { get: () => from[key], enumerable: !(desc = __getOwnPropDesc(from, key)) || desc.enumerable });
  }
  return to;
};
var __toESM = (mod, isNodeMode, target) => (target = mod != null ? __create(__getProtoOf(mod)) : {}, __copyProps(
  // If the importer is in node compatibility mode or this is not an ESM
  // file that has been converted to a CommonJS file using a Babel-
  // compatible transform (i.e. "__esModule" has not been set), then set
  // "default" to the CommonJS "module.exports" for node compatibility.
  isNodeMode || !mod || !mod.__esModule ? __defProp(target, "default", { value: mod, enumerable: true }) : target,
  mod
));
var __toCommonJS = (mod) => __copyProps(__defProp({}, "__esModule", { value: true }), mod);

// src/main.ts
var main_exports = {};
__export(main_exports, {
  clearedNotice: () => clearedNotice,
  default: () => VaultctxPlugin
});
module.exports = __toCommonJS(main_exports);
var import_obsidian7 = require("obsidian");

// src/client.ts
var import_path = require("path");
var import_obsidian = require("obsidian");

// src/discovery.ts
var import_crypto = require("crypto");
var import_fs = require("fs");
var import_os = require("os");
var path = __toESM(require("path"));

// src/problems.ts
var ServerProblem = class extends Error {
  constructor(kind, message, status) {
    super(message);
    this.kind = kind;
    this.status = status;
    this.name = "ServerProblem";
  }
};
var MIN_SERVER_VERSION = "0.1.0";
var problems = {
  notRunning(detail) {
    return new ServerProblem(
      "not-running",
      `vaultctx: no server is running for this vault (${detail}). Run the command \u201Cvaultctx: Start the server\u201D, or \`vaultctx serve\` in a terminal.`
    );
  },
  wrongToken(detail) {
    return new ServerProblem(
      "wrong-token",
      `vaultctx: the server refused this plugin's token (${detail}). Restart \`vaultctx serve\` for this vault as the same user, with the same VAULTCTX_CONFIG_DIR.`,
      401
    );
  },
  otherVault(port, theirs, ours) {
    return new ServerProblem(
      "other-vault",
      `vaultctx: the server on 127.0.0.1:${port} serves another vault (${theirs}), not ${ours}. Stop it, or start a server for this vault.`
    );
  },
  oldServer(detail) {
    return new ServerProblem(
      "old-server",
      `vaultctx: the running server is too old for this plugin (${detail}). Upgrade vaultctx to ${MIN_SERVER_VERSION} or later and restart the server.`
    );
  },
  timeout(what, ms) {
    return new ServerProblem(
      "timeout",
      `vaultctx: the server did not answer ${what} within ${formatSeconds(ms)}. It may be busy (indexing, loading the model); it is tried again on the next request.`
    );
  },
  notFound(message) {
    return new ServerProblem("not-found", `vaultctx: ${message}`, 404);
  },
  failed(what, message, status) {
    return new ServerProblem("failed", `vaultctx: ${what} failed: ${message}`, status);
  }
};
function formatSeconds(ms) {
  const s = ms / 1e3;
  return `${Number.isInteger(s) ? s : Number(s.toFixed(2))} s`;
}
function asProblem(error, what) {
  if (error instanceof ServerProblem) return error;
  const message = error instanceof Error ? error.message : String(error);
  return problems.failed(what, message);
}
function compareVersions(a, b) {
  var _a, _b;
  const parts = (v) => v.split(/[.+-]/).slice(0, 3).map((p) => parseInt(p, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) {
    const d = ((_a = x[i]) != null ? _a : 0) - ((_b = y[i]) != null ? _b : 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

// src/discovery.ts
var SERVER_FILE = path.join(".vaultctx", "server.json");
function serverFile(vaultPath) {
  return path.join(vaultPath, SERVER_FILE);
}
async function readServerFile(vaultPath) {
  let raw;
  try {
    raw = await import_fs.promises.readFile(serverFile(vaultPath), "utf8");
  } catch (e) {
    return null;
  }
  return parseServerInfo(raw);
}
function parseServerInfo(raw) {
  let data;
  try {
    data = JSON.parse(raw);
  } catch (e) {
    return null;
  }
  if (typeof data !== "object" || data === null) return null;
  const { port, pid, vault } = data;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  if (typeof pid !== "number" || !Number.isInteger(pid)) return null;
  if (typeof vault !== "string") return null;
  return { port, pid, vault };
}
function configDir(env = process.env, platform = process.platform, home = (0, import_os.homedir)()) {
  var _a;
  const expand = (p) => p === "~" || p.startsWith("~/") ? path.join(home, p.slice(1)) : p;
  if (env.VAULTCTX_CONFIG_DIR) return expand(env.VAULTCTX_CONFIG_DIR);
  if (platform === "darwin") return path.join(home, "Library", "Application Support", "vaultctx");
  if (platform === "win32") {
    const local = env.LOCALAPPDATA || path.join(home, "AppData", "Local");
    return path.join(local, "vaultctx", "vaultctx");
  }
  const xdg = (_a = env.XDG_CONFIG_HOME) == null ? void 0 : _a.trim();
  return path.join(xdg ? expand(xdg) : path.join(home, ".config"), "vaultctx");
}
function tokenFile(dir = configDir()) {
  return path.join(dir, "token");
}
async function readToken(file = tokenFile()) {
  var _a, _b;
  let text;
  try {
    const handle = await import_fs.promises.open(file, import_fs.constants.O_RDONLY | ((_a = import_fs.constants.O_NOFOLLOW) != null ? _a : 0));
    try {
      const info = await handle.stat();
      const mine = process.getuid === void 0 || info.uid === process.getuid();
      const private_ = process.platform === "win32" || (info.mode & 511) === 384;
      if (!info.isFile() || !mine || !private_) {
        throw problems.wrongToken(
          `the token file ${file} is not this user's private file (a regular file, mode 0600)`
        );
      }
      text = await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (!(error instanceof Error) || error.name === "ServerProblem") throw error;
    const code = (_b = error.code) != null ? _b : String(error);
    const why = code === "ELOOP" ? "it is a symlink" : code;
    throw problems.wrongToken(`cannot read the token file ${file}: ${why}`);
  }
  const token = text.trim();
  if (!token) throw problems.wrongToken(`the token file ${file} is empty`);
  return token;
}
function newChallenge() {
  return (0, import_crypto.randomBytes)(16).toString("hex");
}
function proofs(token, challenge, port, vault) {
  const said = `${challenge}
${port}`;
  const hmac = (message) => (0, import_crypto.createHmac)("sha256", token).update(message, "utf8").digest("hex");
  return { server: hmac(said), vault: hmac(`${said}
${vault}`) };
}
async function realVaultPath(vaultPath) {
  try {
    return await import_fs.promises.realpath(vaultPath);
  } catch (e) {
    return path.resolve(vaultPath);
  }
}

// src/client.ts
var HOST = "127.0.0.1";
var RETRY_FRESH = /* @__PURE__ */ new Set(["not-running", "wrong-token"]);
var FORGET = /* @__PURE__ */ new Set(["not-running", "wrong-token", "other-vault", "old-server"]);
var VaultctxClient = class {
  constructor(options) {
    this.options = options;
    this.connection = null;
    var _a;
    this.transport = (_a = options.transport) != null ? _a : ((request) => (0, import_obsidian.requestUrl)(request));
  }
  /** Notes related to the open note (recorded as open first when `touch`). */
  related(note, options = {}) {
    var _a, _b, _c;
    const body = {
      note,
      k: (_a = options.k) != null ? _a : 10,
      no_vectors: (_b = options.noVectors) != null ? _b : false,
      touch: (_c = options.touch) != null ? _c : true
    };
    return this.request("POST", "/related", body);
  }
  select(query, options = {}) {
    var _a, _b;
    const body = { query, k: (_a = options.k) != null ? _a : 10, no_vectors: (_b = options.noVectors) != null ? _b : false };
    return this.request("POST", "/select", body);
  }
  context(query, options = {}) {
    var _a, _b;
    const body = {
      query,
      k: (_a = options.k) != null ? _a : 30,
      no_vectors: (_b = options.noVectors) != null ? _b : false
    };
    if (options.budget) body.budget = options.budget;
    return this.request("POST", "/context", body);
  }
  /** The notes later selects lean towards, each with its weight now. */
  focus() {
    return this.request("GET", "/focus");
  }
  /** Forget every note recorded as open: later answers rank by the question alone. */
  clearFocus() {
    return this.request("DELETE", "/focus");
  }
  status() {
    return this.request("GET", "/status");
  }
  /** Forget the checked connection: the next request reads server.json again. */
  reset() {
    this.connection = null;
  }
  /** The checked connection to this vault's server (found and verified once, then reused). */
  connect() {
    if (this.connection === null) {
      const attempt = this.open();
      this.connection = attempt;
      attempt.catch(() => {
        if (this.connection === attempt) this.connection = null;
      });
    }
    return this.connection;
  }
  async request(method, route, body) {
    var _a, _b, _c, _d;
    try {
      const value = await this.requestOnce(method, route, body);
      (_b = (_a = this.options).onLinkState) == null ? void 0 : _b.call(_a, "connected");
      return value;
    } catch (error) {
      if (error instanceof ServerProblem) {
        const state = error.kind === "not-running" ? "not-running" : "problem";
        if (error.kind !== "not-found") (_d = (_c = this.options).onLinkState) == null ? void 0 : _d.call(_c, state, error);
      }
      throw error;
    }
  }
  async requestOnce(method, route, body) {
    for (let attempt = 0; ; attempt++) {
      const reused = this.connection !== null;
      const connection = await this.connect();
      try {
        return await this.send(connection, method, route, body);
      } catch (error) {
        if (error instanceof ServerProblem && FORGET.has(error.kind)) {
          if (this.connection !== null && await this.connection.catch(() => null) === connection) {
            this.connection = null;
          }
          if (reused && attempt === 0 && RETRY_FRESH.has(error.kind)) continue;
        }
        throw error;
      }
    }
  }
  /** Find the server in server.json, then make sure it is ours before the token or any
   * question goes to it: it proves it holds this install's token and serves this very vault
   * (`GET /health?challenge=`, unauthenticated); then it must take the token and be recent
   * enough. */
  async open() {
    var _a;
    const { vaultPath } = this.options;
    if (!(0, import_path.isAbsolute)(vaultPath)) {
      throw problems.failed("connecting", "this vault has no folder on disk (vaultctx needs Obsidian's desktop app)");
    }
    const info = await readServerFile(vaultPath);
    if (info === null) throw problems.notRunning("no .vaultctx/server.json in the vault");
    const token = await readToken();
    const challenge = newChallenge();
    const open = { port: info.port, token: null };
    const answer = await this.send(open, "GET", `/health?challenge=${challenge}`);
    const proof = answer.proof;
    if (typeof (proof == null ? void 0 : proof.server) !== "string" || typeof proof.vault !== "string") {
      throw problems.oldServer("its /health answers no challenge");
    }
    if (proof.server !== proofs(token, challenge, info.port, "").server) {
      throw problems.wrongToken(`what answers on ${HOST}:${info.port} does not prove it holds this install's token`);
    }
    const ours = await realVaultPath(vaultPath);
    const names = [.../* @__PURE__ */ new Set([ours, vaultPath])];
    const partial = { port: info.port, token, health: { ok: false } };
    const health = await this.send(partial, "GET", "/health");
    if (!names.some((name) => proofs(token, challenge, info.port, name).vault === proof.vault)) {
      throw problems.otherVault(info.port, (_a = health.vault) != null ? _a : "unknown", ours);
    }
    if (typeof health.vault !== "string") throw problems.wrongToken("GET /health did not take the token");
    if (!health.version || compareVersions(health.version, MIN_SERVER_VERSION) < 0) {
      throw problems.oldServer(`version ${health.version || "unknown"}`);
    }
    return { port: info.port, token, health };
  }
  /** One request; with `token: null` (before the server proved it is ours), no token. */
  async send(connection, method, route, body) {
    const what = `${method} ${route}`;
    const request = {
      url: `http://${HOST}:${connection.port}${route}`,
      method,
      throw: false
    };
    if (connection.token !== null) request.headers = { Authorization: `Bearer ${connection.token}` };
    if (body !== void 0) {
      request.contentType = "application/json";
      request.body = JSON.stringify(body);
    }
    const ms = this.options.timeoutMs();
    let response;
    try {
      response = await withTimeout(this.transport(request), ms, () => problems.timeout(what, ms));
    } catch (error2) {
      if (error2 instanceof ServerProblem) throw error2;
      const reason = error2 instanceof Error ? error2.message : String(error2);
      throw problems.notRunning(`nothing answers on ${HOST}:${connection.port}: ${reason}`);
    }
    const data = parseJson(response.text);
    if (response.status === 200) {
      if (data === void 0) throw problems.failed(what, "the answer is not JSON", 200);
      return data;
    }
    const { error, message } = data != null ? data : {};
    const said = error ? `${error}: ${message != null ? message : ""}` : `HTTP ${response.status}`;
    if (response.status === 401) throw problems.wrongToken(`${what} answered 401`);
    if (response.status === 404 && error === "NoteNotFound") {
      throw problems.notFound(message != null ? message : "note not found");
    }
    if (response.status === 404 || response.status === 405) {
      throw problems.oldServer(`it has no ${what}`);
    }
    throw problems.failed(what, said, response.status);
  }
};
function parseJson(text) {
  if (!text) return void 0;
  try {
    return JSON.parse(text);
  } catch (e) {
    return void 0;
  }
}
function withTimeout(promise, ms, onTimeout) {
  return new Promise((resolve2, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve2(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      }
    );
  });
}

// src/context.ts
var import_obsidian2 = require("obsidian");

// src/render.ts
var RETRIEVERS = ["lexical", "vector", "graph", "memory"];
var WHY = {
  lexical: "its words match (full-text search)",
  vector: "its meaning is close (embedding search)",
  graph: "it is linked with the note you have open",
  memory: "a memory of earlier sessions"
};
function groupByNote(candidates, openPath, limit) {
  const entries = /* @__PURE__ */ new Map();
  for (const candidate of candidates) {
    if (!candidate.path || candidate.kind === "memory" || candidate.path === openPath) continue;
    const entry = entries.get(candidate.path);
    if (entry) {
      entry.more.push(candidate);
    } else if (entries.size < limit) {
      entries.set(candidate.path, {
        path: candidate.path,
        title: titleOf(candidate),
        best: candidate,
        more: []
      });
    }
  }
  return [...entries.values()];
}
function titleOf(candidate) {
  var _a;
  if (candidate.title) return candidate.title;
  const name = (_a = candidate.path.split("/").pop()) != null ? _a : candidate.path;
  return name.replace(/\.md$/i, "");
}
function headingTrail(candidate) {
  const raw = candidate.heading_path || candidate.heading || "";
  const parts = raw.split(" > ").map((part) => part.trim()).filter(Boolean);
  if (parts.length && parts[0] === titleOf(candidate)) parts.shift();
  return parts;
}
function snippet(text, max = 180) {
  const plain = tableRows(text).replace(/^---\n[\s\S]*?\n---\n/, "").replace(/```[\s\S]*?```/g, " ").replace(/!\[\[[^\]]*\]\]/g, " ").replace(/\[\[([^\]|#]*)(?:#[^\]|]*)?\|([^\]]*)\]\]/g, "$2").replace(/\[\[([^\]|]*)\]\]/g, (_, target) => target.replace("#", " \u203A ")).replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1").replace(/^\s{0,3}(#{1,6}\s+|>\s?|[-*+]\s+(\[[ xX]\]\s+)?|\d+[.)]\s+)/gm, "").replace(/(\*\*|__|~~|==|`)/g, "").replace(/(^|[^\w*])[*_]([^*_\n]+)[*_](?![\w*])/g, "$1$2").replace(/\s+\^[\w-]+\s*$/gm, "").replace(/\s+/g, " ").trim();
  if (plain.length <= max) return plain;
  const cut = plain.slice(0, max);
  const space = cut.lastIndexOf(" ");
  return `${(space > max * 0.6 ? cut.slice(0, space) : cut).replace(/[\s,.;:]+$/, "")}\u2026`;
}
function tableRows(text) {
  if (!text.includes("|")) return text;
  return text.split("\n").map((line) => {
    if (!/^\s*\|.*\|\s*$/.test(line)) return line;
    const cells = line.split("|").map((cell) => cell.trim()).filter(Boolean);
    return cells.every((cell) => /^:?-+:?$/.test(cell)) ? "" : cells.join(" \xB7 ");
  }).join("\n");
}
function badges(candidate) {
  var _a, _b;
  const sources = (_a = candidate.sources) != null ? _a : {};
  const known = RETRIEVERS.filter((name) => name in sources);
  const others = Object.keys(sources).filter((name) => !RETRIEVERS.includes(name));
  const found = [];
  for (const retriever of [...known, ...others]) {
    const source = sources[retriever];
    if (!source) continue;
    const why = (_b = WHY[retriever]) != null ? _b : `found by the ${retriever} retriever`;
    found.push({
      retriever,
      label: `${retriever} #${source.rank}`,
      title: `${retriever}: rank ${source.rank}, score ${formatScore(source.score)} \u2014 ${why}`
    });
  }
  return found;
}
function formatScore(score) {
  return Number.isFinite(score) ? score.toFixed(2) : "\u2013";
}
function linkTarget(candidate) {
  if (/\.pdf$/i.test(candidate.path) && typeof candidate.start_line === "number") {
    return { linktext: `${candidate.path}#page=${candidate.start_line}`, line: null };
  }
  const path2 = candidate.path.replace(/\.md$/i, "");
  const heading = candidate.heading ? cleanHeading(candidate.heading) : "";
  if (heading) return { linktext: `${path2}#${heading}`, line: null };
  const line = typeof candidate.start_line === "number" ? Math.max(0, candidate.start_line - 1) : null;
  return { linktext: path2, line };
}
function cleanHeading(heading) {
  return heading.replace(/[#|^[\]]+/g, " ").replace(/\s+/g, " ").trim();
}
function el(parent, tag, className, text) {
  const child = parent.ownerDocument.createElement(tag);
  if (className) child.className = className;
  if (text !== void 0) child.textContent = text;
  parent.appendChild(child);
  return child;
}
var NO_GOOD_MATCH = "No good match; closest:";
function renderNoGoodMatch(parent) {
  const notice = el(parent, "div", "vaultctx-no-match", NO_GOOD_MATCH);
  notice.title = "Nothing in the vault answers this well: these passages are only the closest ones.";
  return notice;
}
function formatConfidence(confidence) {
  return typeof confidence === "number" && Number.isFinite(confidence) ? `${Math.round(confidence * 100)}%` : "\u2013";
}
function renderCandidate(parent, candidate, title) {
  const top = el(parent, "div", "vaultctx-result-top");
  el(top, "span", "vaultctx-result-title", title != null ? title : titleOf(candidate));
  const score = el(top, "span", "vaultctx-score", formatScore(candidate.score));
  score.title = "note score: 1 is the best possible match, more when linked with the open note";
  if (candidate.confidence !== void 0) {
    const sure = el(top, "span", "vaultctx-confidence", formatConfidence(candidate.confidence));
    sure.title = "confidence that this passage answers the question";
  }
  const trail = headingTrail(candidate);
  if (trail.length) el(parent, "div", "vaultctx-result-heading", trail.join(" \u203A "));
  const text = snippet(candidate.text);
  if (text) el(parent, "div", "vaultctx-result-snippet", text);
  const found = badges(candidate);
  if (found.length) {
    const row = el(parent, "div", "vaultctx-badges");
    for (const badge of found) {
      const span = el(row, "span", `vaultctx-badge vaultctx-badge-${badge.retriever}`, badge.label);
      span.title = badge.title;
    }
  }
}
function renderPanel(root, state, handlers) {
  var _a;
  root.replaceChildren();
  root.classList.add("vaultctx-panel");
  root.classList.toggle("is-loading", state.kind === "loading");
  if (state.kind === "idle") {
    el(root, "div", "vaultctx-empty", (_a = state.message) != null ? _a : "Open a note to see the notes that matter for it.");
    return;
  }
  if (state.kind === "problem") {
    const box = el(root, "div", "vaultctx-problem");
    el(box, "div", "vaultctx-problem-message", state.message);
    if (state.action === "start" && handlers.start) {
      const button = el(box, "button", "mod-cta", "Start the server");
      button.addEventListener("click", () => {
        var _a2;
        return (_a2 = handlers.start) == null ? void 0 : _a2.call(handlers);
      });
    } else if (state.action === "retry" && handlers.retry) {
      const button = el(box, "button", "", "Try again");
      button.addEventListener("click", () => {
        var _a2;
        return (_a2 = handlers.retry) == null ? void 0 : _a2.call(handlers);
      });
    }
    return;
  }
  const header = el(root, "div", "vaultctx-header");
  el(header, "span", "vaultctx-header-label", "Related to ");
  el(header, "span", "vaultctx-header-note", state.note);
  if (state.kind === "loading") {
    el(header, "span", "vaultctx-header-meta", "\u2026");
    return;
  }
  const count = state.entries.length;
  const meta = `${count} note${count === 1 ? "" : "s"}${state.ms !== void 0 ? ` \xB7 ${Math.round(state.ms)} ms` : ""}`;
  el(header, "span", "vaultctx-header-meta", meta);
  if (!count) {
    el(root, "div", "vaultctx-empty", "Nothing else in the vault relates to this note yet.");
    return;
  }
  if (state.noGoodMatch) renderNoGoodMatch(root);
  const list = el(root, "ol", "vaultctx-results");
  for (const entry of state.entries) {
    const item = el(list, "li", "vaultctx-result");
    item.tabIndex = 0;
    item.dataset.path = entry.path;
    renderCandidate(item, entry.best, entry.title);
    item.addEventListener("click", (event) => handlers.open(entry.best, event));
    item.addEventListener("keydown", (event) => {
      if (event.key === "Enter") handlers.open(entry.best, event);
    });
    item.addEventListener("mouseover", (event) => {
      var _a2;
      return (_a2 = handlers.hover) == null ? void 0 : _a2.call(handlers, entry.best, event, item);
    });
    if (entry.more.length) {
      const more = el(item, "ul", "vaultctx-more");
      for (const passage of entry.more) {
        const trail = headingTrail(passage);
        const link = el(more, "li", "vaultctx-more-link", `\u203A ${trail.join(" \u203A ") || "top of the note"}`);
        link.title = snippet(passage.text, 300);
        link.addEventListener("click", (event) => {
          event.stopPropagation();
          handlers.open(passage, event);
        });
        link.addEventListener("mouseover", (event) => {
          var _a2;
          event.stopPropagation();
          (_a2 = handlers.hover) == null ? void 0 : _a2.call(handlers, passage, event, link);
        });
      }
    }
  }
}

// src/context.ts
function sourceLink(item) {
  if (!item.path) return null;
  const path2 = item.path.replace(/\.md$/i, "");
  const heading = item.heading ? cleanHeading(item.heading) : "";
  return heading ? `[[${path2}#${heading}]]` : `[[${path2}]]`;
}
function formatContext(query, context) {
  const notes = /* @__PURE__ */ new Set();
  const lines = [`## Context from my notes`, "", `> ${oneLine(query)}`, ""];
  for (const item of context.items) {
    const link = sourceLink(item);
    if (item.path) notes.add(item.path);
    lines.push(`### ${link != null ? link : "From memory"}`, "", item.text.trim(), "");
  }
  const sources = [...notes].map((path2) => `[[${path2.replace(/\.md$/i, "")}]]`);
  if (sources.length) lines.push(`Sources: ${sources.join(", ")}`, "");
  lines.push(
    `<!-- vaultctx context: ${context.items.length} passages, ${context.token_count}/${context.budget} tokens, gate ${context.gate}, hash ${context.context_hash} -->`
  );
  return { markdown: `${lines.join("\n")}
`, notes: notes.size, tokens: context.token_count };
}
function oneLine(text) {
  return text.replace(/\s+/g, " ").trim();
}
function copiedNotice(copied) {
  const notes = `${copied.notes} note${copied.notes === 1 ? "" : "s"}`;
  return `vaultctx: copied the context of ${notes} (${copied.tokens.toLocaleString("en-US")} tokens) to the clipboard.`;
}
var QuestionModal = class extends import_obsidian2.Modal {
  constructor(app, resolve2) {
    super(app);
    this.resolve = resolve2;
    this.answered = false;
  }
  onOpen() {
    this.titleEl.textContent = "Context for an LLM";
    const doc = this.contentEl.ownerDocument;
    const form = doc.createElement("form");
    form.className = "vaultctx-question";
    const input = doc.createElement("input");
    input.type = "text";
    input.placeholder = "What should the context be about?";
    input.className = "vaultctx-question-input";
    const button = doc.createElement("button");
    button.type = "submit";
    button.className = "mod-cta";
    button.textContent = "Copy context";
    form.append(input, button);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const question = input.value.trim();
      if (!question) return;
      this.answered = true;
      this.close();
      this.resolve(question);
    });
    this.contentEl.appendChild(form);
    input.focus();
  }
  onClose() {
    this.contentEl.replaceChildren();
    if (!this.answered) this.resolve(null);
  }
};
function askQuestion(app) {
  return new Promise((resolve2) => new QuestionModal(app, resolve2).open());
}

// src/notify.ts
var import_obsidian3 = require("obsidian");
var NOTICE_MS = 8e3;
var Notifier = class {
  constructor() {
    this.lastShown = null;
  }
  /** Show `problem` unless the same kind is already what the user was last told;
   * `explicit` (a command the user ran) always shows it. Returns whether it showed. */
  report(problem, explicit = false) {
    if (!explicit && this.lastShown === problem.kind) return false;
    this.lastShown = problem.kind;
    new import_obsidian3.Notice(problem.message, NOTICE_MS);
    return true;
  }
  /** Things work again: the next problem is news. */
  clear() {
    this.lastShown = null;
  }
  info(message, ms = 4e3) {
    new import_obsidian3.Notice(message, ms);
  }
};

// src/panel.ts
var import_obsidian4 = require("obsidian");

// src/latest.ts
var realClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle)
};
var LatestOnly = class {
  constructor(run, delayMs, clock = realClock) {
    this.run = run;
    this.delayMs = delayMs;
    this.clock = clock;
    this.seq = 0;
    this.timer = null;
    this.lastStart = -Infinity;
    this.waiters = [];
    /** How many answers arrived too late and were dropped (tests and benchmarks read it). */
    this.dropped = 0;
  }
  /** Ask for `arg`; resolves with the outcome of the latest request: this one's, or that of
   * a later call that superseded it (every waiter then gets the newest answer). */
  schedule(arg) {
    const seq = ++this.seq;
    const promise = new Promise((resolve2) => this.waiters.push(resolve2));
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    const quiet = this.clock.now() - this.lastStart >= this.delayMs;
    if (quiet) {
      this.start(arg, seq);
    } else {
      this.timer = this.clock.setTimeout(() => {
        this.timer = null;
        this.start(arg, seq);
      }, this.delayMs);
    }
    return promise;
  }
  /** Drop whatever is pending or in flight; its waiters get `cancelled`. */
  cancel() {
    this.seq++;
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
    this.timer = null;
    this.settle({ status: "cancelled" });
  }
  get pending() {
    return this.waiters.length > 0;
  }
  start(arg, seq) {
    const started = this.clock.now();
    this.lastStart = started;
    let request;
    try {
      request = this.run(arg);
    } catch (error) {
      request = Promise.reject(error);
    }
    request.then(
      (value) => this.finish(seq, { status: "done", value, ms: this.clock.now() - started }),
      (error) => this.finish(seq, { status: "failed", error, ms: this.clock.now() - started })
    );
  }
  finish(seq, outcome) {
    if (seq !== this.seq) {
      this.dropped++;
      return;
    }
    this.settle(outcome);
  }
  settle(outcome) {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve2 of waiters) resolve2(outcome);
  }
};

// src/panel.ts
var VIEW_TYPE = "vaultctx-related";
var NOTE_CHANGE_DEBOUNCE_MS = 250;
var VAULT_CHANGE_REFRESH_MS = 1500;
var PanelController = class {
  constructor(root, deps) {
    this.root = root;
    this.deps = deps;
    this.state = { kind: "idle" };
    /** The note the panel is about (what it shows, or is fetching). */
    this.note = null;
    /** The note whose answer (results or problem) the panel shows now. */
    this.answered = null;
    this.wanted = null;
    this.touched = null;
    this.changedAt = 0;
    this.refreshTimer = null;
    this.closed = false;
    var _a, _b;
    this.clock = (_a = deps.clock) != null ? _a : realClock;
    this.latest = new LatestOnly(
      (request) => {
        const { k, noVectors } = deps.options();
        return deps.client.related(request.path, { k, noVectors, touch: request.touch });
      },
      (_b = deps.debounceMs) != null ? _b : NOTE_CHANGE_DEBOUNCE_MS,
      this.clock
    );
    this.render(this.state);
  }
  /** How many answers came after a newer request and were dropped. */
  get droppedAnswers() {
    return this.latest.dropped;
  }
  /** The active note changed (null: none, or not a Markdown note). */
  noteChanged(file) {
    if (this.closed) return;
    const note = file && file.extension === "md" ? file : null;
    this.wanted = note;
    if (!this.visible()) return;
    this.show(note);
  }
  /** The layout changed: a panel that has become visible catches up with the open note. */
  visibilityChanged() {
    var _a, _b;
    if (this.closed || !this.visible()) return;
    if (((_a = this.wanted) == null ? void 0 : _a.path) !== ((_b = this.note) == null ? void 0 : _b.path) || this.state.kind === "idle") {
      this.show(this.wanted);
    }
  }
  /** A note of the vault was saved, created, renamed or deleted: ask again once the
   * server's watcher has indexed it (without recording the open note again). */
  vaultChanged() {
    var _a;
    if (this.closed || this.note === null) return;
    if (this.refreshTimer !== null) this.clock.clearTimeout(this.refreshTimer);
    this.refreshTimer = this.clock.setTimeout(() => {
      this.refreshTimer = null;
      this.refresh();
    }, (_a = this.deps.refreshMs) != null ? _a : VAULT_CHANGE_REFRESH_MS);
  }
  /** Ask again for the open note. */
  refresh() {
    if (this.closed || !this.visible() || this.note === null) return;
    this.fetch(this.note);
  }
  close() {
    this.closed = true;
    this.latest.cancel();
    if (this.refreshTimer !== null) this.clock.clearTimeout(this.refreshTimer);
  }
  visible() {
    var _a, _b, _c;
    return (_c = (_b = (_a = this.deps).isVisible) == null ? void 0 : _b.call(_a)) != null ? _c : true;
  }
  show(note) {
    var _a;
    if (note === null) {
      this.note = null;
      this.answered = null;
      this.latest.cancel();
      this.render({ kind: "idle" });
      return;
    }
    if (note.path === ((_a = this.note) == null ? void 0 : _a.path) && this.state.kind === "results") return;
    this.note = note;
    this.answered = null;
    this.changedAt = this.clock.now();
    if (this.state.kind !== "results") this.render({ kind: "loading", note: note.basename });
    this.fetch(note);
  }
  /** The note is recorded as open (`touch`) by its first answered request only. */
  fetch(note) {
    const touch = this.touched !== note.path;
    this.latest.schedule({ path: note.path, touch }).then((outcome) => this.answer(note, outcome, touch));
  }
  answer(note, outcome, touched) {
    var _a;
    if (this.closed || outcome.status === "cancelled" || note.path !== ((_a = this.note) == null ? void 0 : _a.path)) return;
    this.answered = note.path;
    if (outcome.status === "done") {
      if (touched) this.touched = note.path;
      this.deps.notifier.clear();
      const entries = groupByNote(outcome.value.candidates, note.path, this.deps.options().k);
      const noGoodMatch = outcome.value.no_good_match === true;
      this.render({ kind: "results", note: note.basename, entries, ms: outcome.ms, noGoodMatch });
      return;
    }
    const problem = asProblem(outcome.error, "related notes");
    if (problem.kind === "not-found") {
      this.render({
        kind: "idle",
        message: "This note is not in the index yet (it is indexed when saved), or the vault's policy hides it."
      });
      return;
    }
    this.deps.notifier.report(problem);
    this.render(problemState(problem));
  }
  render(state) {
    var _a, _b;
    this.state = state;
    renderPanel(this.root, state, this.deps.handlers);
    (_b = (_a = this.deps).onRendered) == null ? void 0 : _b.call(_a, state, this.clock.now() - this.changedAt);
  }
};
function problemState(problem) {
  const action = problem.kind === "not-running" ? "start" : "retry";
  return { kind: "problem", message: problem.message.replace(/^vaultctx: /, ""), action };
}
var ContextView = class extends import_obsidian4.ItemView {
  constructor(leaf, host) {
    super(leaf);
    this.host = host;
    this.hoverPopover = null;
    this.controller = null;
  }
  getViewType() {
    return VIEW_TYPE;
  }
  getDisplayText() {
    return "Related notes";
  }
  getIcon() {
    return "waypoints";
  }
  async onOpen() {
    const { workspace, vault } = this.app;
    const host = this.host;
    const controller = new PanelController(this.contentEl, {
      client: host.client,
      notifier: host.notifier,
      options: () => ({ k: host.settings.k, noVectors: !host.settings.useVectors }),
      isVisible: () => {
        var _a, _b, _c;
        return (_c = (_b = (_a = this.containerEl).isShown) == null ? void 0 : _b.call(_a)) != null ? _c : true;
      },
      handlers: {
        open: (candidate, event) => {
          var _a, _b;
          return host.openCandidate(candidate, event, (_b = (_a = controller.note) == null ? void 0 : _a.path) != null ? _b : "");
        },
        hover: (candidate, event, target) => {
          var _a, _b;
          return workspace.trigger("hover-link", {
            event,
            source: VIEW_TYPE,
            hoverParent: this,
            targetEl: target,
            linktext: linkTarget(candidate).linktext,
            sourcePath: (_b = (_a = controller.note) == null ? void 0 : _a.path) != null ? _b : ""
          });
        },
        start: () => void host.startServer(),
        retry: () => controller.refresh()
      }
    });
    this.controller = controller;
    this.registerEvent(workspace.on("file-open", (file) => controller.noteChanged(file)));
    this.registerEvent(workspace.on("layout-change", () => controller.visibilityChanged()));
    const changed = (file) => {
      if (file instanceof import_obsidian4.TFile && file.extension === "md") controller.vaultChanged();
    };
    this.registerEvent(vault.on("modify", changed));
    this.registerEvent(vault.on("create", changed));
    this.registerEvent(vault.on("delete", changed));
    this.registerEvent(vault.on("rename", changed));
    this.registerInterval(window.setInterval(() => {
      var _a, _b;
      return ((_b = (_a = this.containerEl).isShown) == null ? void 0 : _b.call(_a)) && host.refreshStatus();
    }, 1e4));
    controller.noteChanged(workspace.getActiveFile());
  }
  async onClose() {
    var _a;
    (_a = this.controller) == null ? void 0 : _a.close();
    this.controller = null;
  }
};

// src/process.ts
var import_child_process = require("child_process");
var START_TIMEOUT_MS = 6e4;
var POLL_MS = 100;
var STDERR_KEPT = 2e3;
var StartFailed = class extends Error {
  constructor(message) {
    super(message);
    this.name = "StartFailed";
  }
};
function serveArgs(vaultPath, extraArgs = []) {
  return ["serve", vaultPath, "--port", "0", ...extraArgs];
}
function splitArgs(text) {
  var _a, _b;
  const args = [];
  const pattern = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let match;
  while ((match = pattern.exec(text)) !== null) args.push((_b = (_a = match[1]) != null ? _a : match[2]) != null ? _b : match[3]);
  return args;
}
var ServerProcess = class {
  constructor() {
    this.child = null;
    this.stderr = "";
    this.exit = null;
    this.spawnError = null;
  }
  /** The process this plugin started, while it runs. */
  get pid() {
    var _a;
    return this.child && this.exit === null ? (_a = this.child.pid) != null ? _a : null : null;
  }
  get running() {
    return this.pid !== null;
  }
  /** Start the server and resolve once it has announced itself in server.json. */
  async start(options) {
    var _a, _b, _c, _d;
    if (this.running) throw new StartFailed("vaultctx: the server this plugin started is still running.");
    const before = await readServerFile(options.vaultPath);
    this.stderr = "";
    this.exit = null;
    this.spawnError = null;
    const child = (0, import_child_process.spawn)(options.executable, serveArgs(options.vaultPath, options.extraArgs), {
      cwd: options.vaultPath,
      env: (_a = options.env) != null ? _a : process.env,
      stdio: ["ignore", "ignore", "pipe"],
      windowsHide: true
    });
    this.child = child;
    (_b = child.stderr) == null ? void 0 : _b.setEncoding("utf8");
    (_c = child.stderr) == null ? void 0 : _c.on("data", (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT);
    });
    child.on("error", (error) => {
      this.spawnError = error;
    });
    child.on("exit", (code, signal) => {
      this.exit = { code, signal };
    });
    const timeout = (_d = options.timeoutMs) != null ? _d : START_TIMEOUT_MS;
    const deadline = Date.now() + timeout;
    for (; ; ) {
      await sleep(POLL_MS);
      if (this.spawnError) {
        this.child = null;
        throw new StartFailed(spawnMessage(options.executable, this.spawnError));
      }
      const info = await readServerFile(options.vaultPath);
      if (info && (info.pid === child.pid || (before === null || info.pid !== before.pid))) {
        if (this.exit === null) return info;
      }
      if (this.exit !== null) {
        this.child = null;
        throw new StartFailed(exitMessage(this.exit, this.stderr));
      }
      if (Date.now() > deadline) {
        this.stop();
        throw new StartFailed(
          `vaultctx: the server did not announce itself within ${formatSeconds(timeout)}; it was stopped.`
        );
      }
    }
  }
  /** Stop the process this plugin started (SIGTERM: the server removes its server.json). */
  stop() {
    const child = this.child;
    if (!child || this.exit !== null) return false;
    child.kill("SIGTERM");
    return true;
  }
  /** Resolves once the started process has exited (or at once when none runs). */
  exited(timeoutMs = 1e4) {
    const child = this.child;
    if (!child || this.exit !== null) return Promise.resolve(true);
    return new Promise((resolve2) => {
      const timer = setTimeout(() => resolve2(false), timeoutMs);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve2(true);
      });
    });
  }
};
function spawnMessage(executable, error) {
  const code = error.code;
  if (code === "ENOENT") {
    return `vaultctx: could not find the executable \u201C${executable}\u201D. Set the full path of vaultctx in the plugin's settings (e.g. ~/.local/bin/vaultctx).`;
  }
  return `vaultctx: could not run \u201C${executable}\u201D: ${error.message}`;
}
function exitMessage(exit, stderr) {
  const how = exit.signal ? `was stopped by ${exit.signal}` : `exited with code ${exit.code}`;
  const said = stderr.trim().split("\n").filter(Boolean).pop();
  return `vaultctx: the server ${how}${said ? `: ${said}` : ""}`;
}
function sleep(ms) {
  return new Promise((resolve2) => setTimeout(resolve2, ms));
}

// src/search.ts
var import_obsidian5 = require("obsidian");
var SEARCH_DEBOUNCE_MS = 120;
var EMPTY = "Type to search the vault with vaultctx.";
var SearchModal = class extends import_obsidian5.SuggestModal {
  constructor(app, host, debounceMs = SEARCH_DEBOUNCE_MS) {
    super(app);
    this.host = host;
    /** The first of the shown passages when the server said no good match (else null). */
    this.closest = null;
    this.setPlaceholder("Search your notes (vaultctx)\u2026");
    this.setInstructions([
      { command: "\u2191\u2193", purpose: "to navigate" },
      { command: "\u21B5", purpose: "to open at the passage" },
      { command: "esc", purpose: "to dismiss" }
    ]);
    this.emptyStateText = EMPTY;
    this.limit = 50;
    this.latest = new LatestOnly(
      (query) => {
        const { k, noVectors } = host.options();
        return host.client.select(query, { k: Math.max(k, 20), noVectors });
      },
      debounceMs
    );
  }
  async getSuggestions(query) {
    var _a;
    if (!query.trim()) {
      this.latest.cancel();
      this.emptyStateText = EMPTY;
      return [];
    }
    const outcome = await this.latest.schedule(query);
    if (outcome.status === "cancelled") return [];
    if (outcome.status === "failed") {
      const problem = asProblem(outcome.error, "search");
      this.host.notifier.report(problem);
      this.emptyStateText = problem.message;
      return [];
    }
    this.host.notifier.clear();
    this.emptyStateText = "No passage matches.";
    const passages = outcome.value.candidates.filter((candidate) => candidate.kind !== "memory");
    this.closest = outcome.value.no_good_match === true ? (_a = passages[0]) != null ? _a : null : null;
    return passages;
  }
  renderSuggestion(candidate, el2) {
    el2.classList.add("vaultctx-suggestion");
    if (candidate === this.closest) renderNoGoodMatch(el2);
    renderCandidate(el2, candidate);
  }
  onChooseSuggestion(candidate, event) {
    this.host.open(candidate, event);
  }
  onClose() {
    super.onClose();
    this.latest.cancel();
  }
};

// src/settings.ts
var import_obsidian6 = require("obsidian");
var DEFAULT_SETTINGS = {
  executable: "vaultctx",
  serveArgs: "",
  k: 10,
  budget: 0,
  useVectors: true,
  timeoutSeconds: 10
};
function loadSettings(stored) {
  const data = typeof stored === "object" && stored !== null ? stored : {};
  const settings = { ...DEFAULT_SETTINGS };
  if (typeof data.executable === "string" && data.executable.trim()) settings.executable = data.executable.trim();
  if (typeof data.serveArgs === "string") settings.serveArgs = data.serveArgs;
  settings.k = intIn(data.k, 1, 50, DEFAULT_SETTINGS.k);
  settings.budget = intIn(data.budget, 0, 1e6, DEFAULT_SETTINGS.budget);
  if (typeof data.useVectors === "boolean") settings.useVectors = data.useVectors;
  settings.timeoutSeconds = intIn(data.timeoutSeconds, 1, 300, DEFAULT_SETTINGS.timeoutSeconds);
  return settings;
}
function intIn(value, min, max, fallback) {
  const n = typeof value === "string" ? Number(value) : value;
  return typeof n === "number" && Number.isInteger(n) && n >= min && n <= max ? n : fallback;
}
var VaultctxSettingTab = class extends import_obsidian6.PluginSettingTab {
  constructor(app, host) {
    super(app, host);
    this.host = host;
  }
  display() {
    const { containerEl } = this;
    containerEl.replaceChildren();
    const settings = this.host.settings;
    const save = (change) => {
      this.host.settings = loadSettings({ ...this.host.settings, ...change });
      return this.host.saveSettings();
    };
    containerEl.createEl("p", {
      text: "vaultctx runs on this computer: the plugin talks only to the vault's own server on 127.0.0.1, with the token from its 0600 file. Nothing leaves the machine."
    });
    new import_obsidian6.Setting(containerEl).setName("vaultctx executable").setDesc("What \u201CStart the server\u201D runs: a name on PATH, or the full path (e.g. ~/.local/bin/vaultctx).").addText(
      (text) => text.setPlaceholder("vaultctx").setValue(settings.executable).onChange((value) => save({ executable: value }))
    );
    new import_obsidian6.Setting(containerEl).setName("Server arguments").setDesc("More arguments for `vaultctx serve`, e.g. --no-embed (text and links only).").addText((text) => text.setValue(settings.serveArgs).onChange((value) => save({ serveArgs: value })));
    new import_obsidian6.Setting(containerEl).setName("Related notes").setDesc("How many notes the panel shows (1\u201350).").addText((text) => text.setValue(String(settings.k)).onChange((value) => save({ k: Number(value) })));
    new import_obsidian6.Setting(containerEl).setName("Context budget").setDesc("Tokens \u201CCopy context\u201D may use; 0 uses the vault's budget_tokens.").addText(
      (text) => text.setValue(String(settings.budget)).onChange((value) => save({ budget: Number(value) }))
    );
    new import_obsidian6.Setting(containerEl).setName("Embedding search").setDesc("Off: full-text and links only (the server never loads the model for the plugin's requests).").addToggle((toggle) => toggle.setValue(settings.useVectors).onChange((value) => save({ useVectors: value })));
    new import_obsidian6.Setting(containerEl).setName("Request time limit").setDesc("Seconds to wait for the server before giving up (1\u2013300).").addText(
      (text) => text.setValue(String(settings.timeoutSeconds)).onChange((value) => save({ timeoutSeconds: Number(value) }))
    );
  }
};

// src/status.ts
var TEXT = {
  unknown: "vaultctx",
  starting: "vaultctx: starting\u2026",
  connected: "vaultctx: connected",
  indexing: "vaultctx: indexing\u2026",
  "not-running": "vaultctx: not running",
  problem: "vaultctx: problem"
};
var StatusBar = class {
  constructor(el2, onClick) {
    this.el = el2;
    this.state = "unknown";
    el2.classList.add("vaultctx-status", "mod-clickable");
    el2.addEventListener("click", onClick);
    this.set("unknown", "vaultctx: click to check the connection to this vault's server");
  }
  get text() {
    var _a;
    return (_a = this.el.textContent) != null ? _a : "";
  }
  set(state, detail) {
    this.state = state;
    this.el.textContent = TEXT[state];
    this.el.dataset.state = state;
    this.el.setAttribute("aria-label", detail != null ? detail : TEXT[state]);
    this.el.title = detail != null ? detail : TEXT[state];
  }
};

// src/main.ts
var VaultctxPlugin = class extends import_obsidian7.Plugin {
  constructor() {
    super(...arguments);
    this.settings = { ...DEFAULT_SETTINGS };
    this.notifier = new Notifier();
    this.server = new ServerProcess();
    this.statusBar = null;
    this.clientInstance = null;
  }
  async onload() {
    this.settings = loadSettings(await this.loadData());
    this.addSettingTab(new VaultctxSettingTab(this.app, this));
    this.registerView(VIEW_TYPE, (leaf) => new ContextView(leaf, this));
    this.registerHoverLinkSource(VIEW_TYPE, { display: "vaultctx related notes", defaultMod: false });
    this.statusBar = new StatusBar(this.addStatusBarItem(), () => void this.checkConnection());
    this.registerEvent(this.app.workspace.on("quit", () => this.server.stop()));
    this.addRibbonIcon("waypoints", "vaultctx: related notes", () => void this.openPanel());
    this.addCommand({
      id: "open-related-notes",
      name: "Open the related notes panel",
      callback: () => void this.openPanel()
    });
    this.addCommand({ id: "search", name: "Search the vault", callback: () => this.openSearch() });
    this.addCommand({
      id: "copy-context",
      name: "Copy context for an LLM (selection or a question)",
      callback: () => void this.copyContext()
    });
    this.addCommand({ id: "start-server", name: "Start the server", callback: () => void this.startServer() });
    this.addCommand({
      id: "stop-server",
      name: "Stop the server this plugin started",
      checkCallback: (checking) => {
        if (!this.server.running) return false;
        if (!checking) this.stopServer();
        return true;
      }
    });
    this.addCommand({
      id: "clear-focus",
      name: "Forget which notes are open (clear the focus)",
      callback: () => void this.clearFocus()
    });
    this.addCommand({
      id: "check-connection",
      name: "Check the connection to the server",
      callback: () => void this.checkConnection()
    });
  }
  onunload() {
    this.server.stop();
  }
  async saveSettings() {
    await this.saveData(this.settings);
  }
  /** What the status-bar item says now. */
  get statusText() {
    var _a, _b;
    return (_b = (_a = this.statusBar) == null ? void 0 : _a.text) != null ? _b : "";
  }
  /** The vault's folder on disk (desktop: a FileSystemAdapter). */
  get vaultPath() {
    const adapter = this.app.vault.adapter;
    return adapter instanceof import_obsidian7.FileSystemAdapter ? adapter.getBasePath() : null;
  }
  /** Made on first use. */
  get client() {
    var _a;
    if (this.clientInstance === null) {
      this.clientInstance = new VaultctxClient({
        vaultPath: (_a = this.vaultPath) != null ? _a : "",
        timeoutMs: () => this.settings.timeoutSeconds * 1e3,
        onLinkState: (state, problem) => {
          var _a2, _b, _c;
          if (state === "connected") {
            if (((_a2 = this.statusBar) == null ? void 0 : _a2.state) !== "indexing") (_b = this.statusBar) == null ? void 0 : _b.set("connected");
          } else {
            (_c = this.statusBar) == null ? void 0 : _c.set(state, problem == null ? void 0 : problem.message);
          }
        }
      });
    }
    return this.clientInstance;
  }
  async openPanel() {
    var _a;
    const { workspace } = this.app;
    let leaf = (_a = workspace.getLeavesOfType(VIEW_TYPE)[0]) != null ? _a : null;
    if (leaf === null) {
      leaf = workspace.getRightLeaf(false);
      if (leaf === null) return;
      await leaf.setViewState({ type: VIEW_TYPE, active: true });
    }
    await workspace.revealLeaf(leaf);
  }
  openSearch() {
    new SearchModal(this.app, {
      client: this.client,
      notifier: this.notifier,
      options: () => ({ k: this.settings.k, noVectors: !this.settings.useVectors }),
      open: (candidate, event) => {
        var _a, _b;
        return this.openCandidate(candidate, event, (_b = (_a = this.app.workspace.getActiveFile()) == null ? void 0 : _a.path) != null ? _b : "");
      }
    }).open();
  }
  /** Open a passage: `path#heading`, or the note at the passage's line. */
  openCandidate(candidate, event, sourcePath) {
    const { linktext, line } = linkTarget(candidate);
    const state = line !== null ? { eState: { line } } : void 0;
    void this.app.workspace.openLinkText(linktext, sourcePath, import_obsidian7.Keymap.isModEvent(event), state);
  }
  async copyContext() {
    var _a, _b;
    const selection = (_b = (_a = this.app.workspace.activeEditor) == null ? void 0 : _a.editor) == null ? void 0 : _b.getSelection().trim();
    const query = selection || await askQuestion(this.app);
    if (!query) return;
    try {
      const context = await this.client.context(query, {
        budget: this.settings.budget || null,
        noVectors: !this.settings.useVectors
      });
      const copied = formatContext(query, context);
      await navigator.clipboard.writeText(copied.markdown);
      this.notifier.info(copiedNotice(copied));
    } catch (error) {
      this.notifier.report(asProblem(error, "copy context"), true);
    }
  }
  /** Forget the notes recorded as open, and say what still counts (notes edited lately). */
  async clearFocus() {
    try {
      const left = await this.client.clearFocus();
      this.notifier.info(clearedNotice(left));
    } catch (error) {
      this.notifier.report(asProblem(error, "clear the focus"), true);
    }
  }
  /** Start `vaultctx serve` for this vault unless a server for it answers already. */
  async startServer() {
    var _a, _b, _c;
    const vaultPath = this.vaultPath;
    if (vaultPath === null) return;
    try {
      await this.client.status();
      this.notifier.info("vaultctx: the server for this vault is already running.");
      return;
    } catch (error) {
      const problem = asProblem(error, "status");
      if (problem.kind !== "not-running") {
        this.notifier.report(problem, true);
        return;
      }
    }
    (_a = this.statusBar) == null ? void 0 : _a.set("starting");
    try {
      const info = await this.server.start({
        executable: this.settings.executable,
        vaultPath,
        extraArgs: splitArgs(this.settings.serveArgs)
      });
      this.client.reset();
      this.notifier.clear();
      this.notifier.info(`vaultctx: started the server for this vault on 127.0.0.1:${info.port}.`);
      await this.refreshStatus();
      for (const leaf of this.app.workspace.getLeavesOfType(VIEW_TYPE)) {
        if (leaf.view instanceof ContextView) (_b = leaf.view.controller) == null ? void 0 : _b.refresh();
      }
    } catch (error) {
      (_c = this.statusBar) == null ? void 0 : _c.set("not-running");
      const message = error instanceof StartFailed ? error.message : asProblem(error, "start").message;
      this.notifier.report(new ServerProblem("not-running", message), true);
    }
  }
  stopServer() {
    var _a;
    if (this.server.stop()) {
      this.client.reset();
      (_a = this.statusBar) == null ? void 0 : _a.set("not-running");
      this.notifier.info("vaultctx: stopped the server this plugin started.");
    }
  }
  /** Ask the server how it is (the status bar shows whether it is indexing). */
  async refreshStatus() {
    var _a, _b;
    try {
      const status = await this.client.status();
      (_b = this.statusBar) == null ? void 0 : _b.set(((_a = status.server) == null ? void 0 : _a.indexing) ? "indexing" : "connected");
    } catch (error) {
      this.notifier.report(asProblem(error, "status"));
    }
  }
  async checkConnection() {
    var _a, _b;
    try {
      const status = await this.client.status();
      (_b = this.statusBar) == null ? void 0 : _b.set(((_a = status.server) == null ? void 0 : _a.indexing) ? "indexing" : "connected");
      this.notifier.clear();
      const notes = status.notes !== void 0 ? `, ${status.notes} notes indexed` : "";
      this.notifier.info(`vaultctx: connected to this vault's server${notes}.`);
    } catch (error) {
      this.notifier.report(asProblem(error, "status"), true);
    }
  }
};
function clearedNotice(left) {
  var _a;
  const forgot = (_a = left.cleared) != null ? _a : 0;
  const opened = `vaultctx: forgot ${forgot} open note${forgot === 1 ? "" : "s"}`;
  if (left.notes.length === 0) return `${opened}; answers now rank by the question alone.`;
  const edited = left.notes.map((n) => n.path).join(", ");
  return `${opened}; notes edited lately still count a little: ${edited}.`;
}
