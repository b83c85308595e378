#!/usr/bin/env node
// Validates rendered Kubernetes manifests (`kubectl kustomize DIR > FILE`):
//   1. every object against the OpenAPI schema of its apiVersion/kind, with the
//      models of the npm package kubernetes-models (unknown kinds are errors);
//   2. the references between objects: Service, PodDisruptionBudget and
//      NetworkPolicy selectors match a pod template, HorizontalPodAutoscaler targets
//      and StatefulSet serviceNames exist, mounted Secrets exist, probe ports are
//      container ports.
// usage: node validate.js RENDERED.yaml [...]   (exit 1 on any error)
'use strict';

const fs = require('fs');
const YAML = require('yaml');

function modelFor(apiVersion, kind) {
  // "v1" -> kubernetes-models/v1; "apps/v1" -> kubernetes-models/apps/v1
  let mod;
  try {
    mod = require(`kubernetes-models/${apiVersion}`);
  } catch (e) {
    return null;
  }
  return typeof mod[kind] === 'function' ? mod[kind] : null;
}

function matches(selector, labels) {
  if (!selector) return false;
  return Object.entries(selector).every(([k, v]) => labels && labels[k] === v);
}

const errors = [];
const objects = [];
for (const file of process.argv.slice(2)) {
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  for (const doc of docs) {
    if (doc.errors.length) {
      errors.push(`${file}: YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
      continue;
    }
    const obj = doc.toJS();
    if (obj) objects.push(obj);
  }
}
if (objects.length === 0) {
  console.error('validate.js: no objects (usage: node validate.js RENDERED.yaml...)');
  process.exit(1);
}

const id = (o) => `${o.kind}/${o.metadata && o.metadata.name}`;

// 1. Schemas.
for (const obj of objects) {
  const Model = modelFor(obj.apiVersion, obj.kind);
  if (!Model) {
    errors.push(`${id(obj)}: no schema for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
    continue;
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    const details = (e.errors || [])
      .map((x) => `${x.instancePath || x.dataPath || '/'} ${x.message}`)
      .join('; ');
    errors.push(`${id(obj)}: ${details || e.message}`);
  }
}

// 2. References.
const workloads = objects.filter((o) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(o.kind));
const podLabels = workloads.map((w) => (w.spec.template.metadata || {}).labels || {});
const byKindName = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);
const anyPodMatches = (selector) => podLabels.some((labels) => matches(selector, labels));

for (const o of objects) {
  if (o.kind === 'Service' && !anyPodMatches(o.spec.selector)) {
    errors.push(`${id(o)}: selector matches no pod template`);
  }
  if (o.kind === 'PodDisruptionBudget' && !anyPodMatches(o.spec.selector.matchLabels)) {
    errors.push(`${id(o)}: selector matches no pod template`);
  }
  if (o.kind === 'NetworkPolicy') {
    const sel = o.spec.podSelector.matchLabels;
    if (sel && !anyPodMatches(sel)) errors.push(`${id(o)}: podSelector matches no pod template`);
  }
  if (o.kind === 'HorizontalPodAutoscaler') {
    const t = o.spec.scaleTargetRef;
    if (!byKindName(t.kind, t.name)) errors.push(`${id(o)}: target ${t.kind}/${t.name} not found`);
  }
  if (o.kind === 'StatefulSet') {
    const svc = byKindName('Service', o.spec.serviceName);
    if (!svc) errors.push(`${id(o)}: serviceName ${o.spec.serviceName} not found`);
    else if (svc.spec.clusterIP !== 'None') errors.push(`${id(o)}: serviceName ${svc.metadata.name} is not headless`);
  }
}
for (const w of workloads) {
  const spec = w.spec.template.spec;
  for (const v of spec.volumes || []) {
    if (v.secret && !byKindName('Secret', v.secret.secretName)) {
      errors.push(`${id(w)}: volume ${v.name}: Secret ${v.secret.secretName} not found`);
    }
  }
  for (const c of spec.containers) {
    const ports = new Set((c.ports || []).flatMap((p) => [p.containerPort, p.name]));
    for (const probe of ['readinessProbe', 'livenessProbe', 'startupProbe']) {
      const p = c[probe];
      const port = p && (p.grpc || p.httpGet || p.tcpSocket || {}).port;
      if (port !== undefined && !ports.has(port)) {
        errors.push(`${id(w)}: ${c.name}.${probe} port ${port} is not a container port`);
      }
    }
  }
}

const kinds = {};
for (const o of objects) kinds[o.kind] = (kinds[o.kind] || 0) + 1;
const summary = Object.entries(kinds).map(([k, n]) => `${n} ${k}`).join(', ');
if (errors.length) {
  for (const e of errors) console.error(`error: ${e}`);
  console.error(`${errors.length} error(s) in ${objects.length} objects`);
  process.exit(1);
}
console.log(`ok: ${objects.length} objects valid (${summary})`);
