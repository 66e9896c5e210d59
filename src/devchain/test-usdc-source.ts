// Kept as a string constant rather than a .sol file so it ships inside the compiled package
// (`tsc` copies only .ts output to dist/).

/** Contract name inside {@link TEST_USDC_SOURCE}. */
export const TEST_USDC_CONTRACT = "TestUSDC";

/**
 * Solidity source of the dev token: 6 decimals like USDC, anyone may mint, and `transfer`
 * reverts on insufficient balance (how tests produce a reverted transaction).
 */
export const TEST_USDC_SOURCE = `// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// Dev-only stand-in for USDC on a local chain. Minting is open: never deploy it anywhere real.
contract TestUSDC {
    string public constant name = "USD Coin (dev)";
    string public constant symbol = "USDC";
    uint8 public constant decimals = 6;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    function mint(address to, uint256 amount) external {
        require(to != address(0), "TestUSDC: mint to the zero address");
        totalSupply += amount;
        balanceOf[to] += amount;
        emit Transfer(address(0), to, amount);
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _move(msg.sender, to, amount);
        return true;
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        allowance[msg.sender][spender] = amount;
        emit Approval(msg.sender, spender, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= amount, "TestUSDC: insufficient allowance");
        if (allowed != type(uint256).max) {
            allowance[from][msg.sender] = allowed - amount;
        }
        _move(from, to, amount);
        return true;
    }

    /// Several transfers in one transaction, so that one receipt carries several Transfer logs.
    function transferBatch(address[] calldata to, uint256[] calldata amounts) external returns (bool) {
        require(to.length == amounts.length, "TestUSDC: length mismatch");
        for (uint256 i = 0; i < to.length; i++) {
            _move(msg.sender, to[i], amounts[i]);
        }
        return true;
    }

    function _move(address from, address to, uint256 amount) private {
        require(to != address(0), "TestUSDC: transfer to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= amount, "TestUSDC: insufficient balance");
        unchecked {
            balanceOf[from] = balance - amount;
        }
        balanceOf[to] += amount;
        emit Transfer(from, to, amount);
    }
}
`;
