import './buffer-global.ts';
import './style.css';
import { startApp } from './app.ts';
import { loadConfig } from './chain.ts';
import { instanceView } from './views/instance.ts';
import { instancesView } from './views/instances.ts';
import { signInView } from './views/signin.ts';
import { subscriptionView } from './views/subscription.ts';
import { usageView } from './views/usage.ts';

const root = document.getElementById('app')!;
try {
  const cfg = await loadConfig();
  startApp(cfg, { signin: signInView, subscription: subscriptionView, instances: instancesView, instance: instanceView, usage: usageView }, root);
} catch (err) {
  root.textContent = `The dashboard could not load its settings: ${(err as Error).message}`;
}
