import { describe, expect, it } from 'vitest';
import { isForbiddenAddress, resolveTarget, type Lookup } from '../src/domain/webhooks/target.ts';

// The SSRF guard by itself: which addresses a webhook may reach, and a name judged by every address it resolves to.

const resolvesTo =
  (...addresses: string[]): Lookup =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('webhook targets', () => {
  it('forbids loopback, private, link-local, CGNAT, unique-local and mapped addresses, and allows public ones', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.5',
      '172.16.3.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fd12::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:a9fe:a9fe',
      '224.0.0.1',
    ]) {
      expect({ a, forbidden: isForbiddenAddress(a) }).toEqual({ a, forbidden: true });
    }
    for (const a of ['93.184.215.14', '1.1.1.1', '2606:4700:4700::1111', '172.32.0.1', '100.128.0.1']) {
      expect({ a, forbidden: isForbiddenAddress(a) }).toEqual({ a, forbidden: false });
    }
  });

  it('refuses a name when any of its addresses is forbidden, and judges it again at each lookup', async () => {
    await expect(resolveTarget('https://hooks.example/x', [], resolvesTo('93.184.215.14'))).resolves.toMatchObject({ address: '93.184.215.14', family: 4 });
    await expect(resolveTarget('https://hooks.example/x', [], resolvesTo('93.184.215.14', '10.0.0.1'))).rejects.toMatchObject({ code: 'WEBHOOK_URL_REFUSED' });
    // The same name later pointing at the metadata service (DNS rebinding): refused at that delivery.
    await expect(resolveTarget('https://hooks.example/x', [], resolvesTo('169.254.169.254'))).rejects.toMatchObject({ code: 'WEBHOOK_URL_REFUSED' });
    await expect(resolveTarget('https://nowhere.example/x', [], async () => Promise.reject(new Error('ENOTFOUND')))).rejects.toMatchObject({
      code: 'WEBHOOK_URL_REFUSED',
    });
  });

  it('lets only allowlisted hosts reach private addresses, and never over http', async () => {
    await expect(resolveTarget('https://receiver.internal/x', ['receiver.internal'], resolvesTo('10.0.0.9'))).resolves.toMatchObject({ address: '10.0.0.9' });
    await expect(resolveTarget('http://receiver.internal/x', ['receiver.internal'], resolvesTo('10.0.0.9'))).rejects.toMatchObject({
      code: 'WEBHOOK_URL_REFUSED',
    });
    await expect(resolveTarget('https://other.internal/x', ['receiver.internal'], resolvesTo('10.0.0.9'))).rejects.toMatchObject({
      code: 'WEBHOOK_URL_REFUSED',
    });
  });
});
