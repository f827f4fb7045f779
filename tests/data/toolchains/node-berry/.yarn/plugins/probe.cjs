// A Yarn plugin: Yarn runs it whenever it starts in this repository. It records whether it had network.
module.exports = {
  name: 'probe',
  factory: () => {
    require('child_process').execSync(
      "{ getent hosts registry.npmjs.org >/dev/null 2>&1 && echo network=online || echo network=offline; } >> /root/codeagent-probe");
    return {};
  },
};
